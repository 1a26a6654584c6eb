package mock

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// TestRejectedPodsVolumesAreFreed: the Secret data and tokens handed to the
// mock for a pod it rejected are not kept: not after CreatePod refuses it,
// and not after a DeletePod that finds no pod running.
func TestRejectedPodsVolumesAreFreed(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	secret := &volume.Contents{Volumes: []volume.Volume{{Name: "creds", Files: []volume.File{{Path: "password", Data: "hunter2"}}}}}
	held := func(pod *corev1.Pod) bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		_, ok := p.volumes[podKey(pod.Namespace, pod.Name)]
		return ok
	}

	for _, annotations := range []map[string]string{
		{AnnotationLogInterval: "1ns"},      // a script the mock refuses
		{AnnotationFailCalls: "Explode"},    // a fault setting it refuses
		{AnnotationHangFor: "1s"},           // a fault setting without its calls
		{AnnotationRunFor + ".app": "soon"}, // per container
	} {
		pod := testPod("rejected", annotations, corev1.RestartPolicyAlways)
		if err := p.SetPodVolumes(ctx, pod, secret); err != nil {
			t.Fatal(err)
		}
		if err := p.CreatePod(ctx, pod); !errdefs.IsInvalidInput(err) {
			t.Fatalf("%v: CreatePod %v, want it rejected", annotations, err)
		}
		if held(pod) {
			t.Errorf("%v: the rejected pod's volume contents are still held", annotations)
		}
	}

	// The controller may hand volumes over for a pod that never runs;
	// deleting it frees them even though the mock answers NotFound.
	never := testPod("never-ran", nil, corev1.RestartPolicyAlways)
	if err := p.SetPodVolumes(ctx, never, secret); err != nil {
		t.Fatal(err)
	}
	if err := p.DeletePod(ctx, never); !errdefs.IsNotFound(err) {
		t.Errorf("DeletePod of a pod never created: %v, want NotFound", err)
	}
	if held(never) {
		t.Error("volume contents of a pod that never ran are held after DeletePod")
	}

	// Another pod of the same name keeps its own.
	newer := testPod("reused", nil, corev1.RestartPolicyAlways)
	newer.UID = "uid-newer"
	if err := p.SetPodVolumes(ctx, newer, secret); err != nil {
		t.Fatal(err)
	}
	older := testPod("reused", map[string]string{AnnotationLogInterval: "1ns"}, corev1.RestartPolicyAlways)
	if err := p.CreatePod(ctx, older); !errdefs.IsInvalidInput(err) {
		t.Fatalf("CreatePod of the older pod: %v", err)
	}
	if !held(newer) {
		t.Error("rejecting an older pod of the same name dropped the newer one's volumes")
	}
}
