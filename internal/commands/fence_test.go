package commands

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vkubelet/virtual-kubelet/internal/ha"
	"github.com/vkubelet/virtual-kubelet/node"
)

// TestReplicaNodeCallsAreFenced: a node built while its replica holds it
// (a context carrying the holding's fence) has its provider behind the
// fence: with the fence down, CreatePod and exec are refused with
// ErrFenced and never reach the backend (the mock has no pod after), while
// reads still answer. The control: a node built without a fence creates
// the pod.
func TestReplicaNodeCallsAreFenced(t *testing.T) {
	o := &Options{}
	o.Provider.Name = "mock"
	o.Node.NodeCount, o.Node.OperatingSystem = 1, "linux"
	o.Node.TaintKey, o.Node.TaintEffect = "virtual-kubelet.io/provider", string(corev1.TaintEffectNoSchedule)
	o.Node.StatusReportFrequency = time.Minute
	ctx, cancel := context.WithCancel(t.Context())
	sh, err := startShared(ctx, o, fake.NewClientset(), nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer sh.stop()
	defer cancel()
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1"},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
	build := func(ctx context.Context, name string) node.Capabilities {
		t.Helper()
		_, caps, err := buildNode(ctx, o, name, 10250, "127.0.0.1", sh, nil)
		if err != nil {
			t.Fatal(err)
		}
		return caps
	}

	// A fence not renewed since it was made is down, as a resumed
	// replica's is before its timer fires.
	fence := ha.NewFence("vk-fenced", time.Minute)
	fenceCtx, release := fence.Context(ctx)
	defer release()
	fenced := build(fenceCtx, "vk-fenced")
	call := context.Background() // the refusal does not wait for the fence's context to end
	if err := fenced.Pods.CreatePod(call, pod.DeepCopy()); !errors.Is(err, ha.ErrFenced) {
		t.Fatalf("CreatePod past the fence: %v, want ErrFenced", err)
	}
	if err := fenced.Exec.RunInContainer(call, "ns", "web", "app", []string{"true"}, nil); !errors.Is(err, ha.ErrFenced) {
		t.Errorf("exec past the fence: %v, want ErrFenced", err)
	}
	pods, err := fenced.Pods.GetPods(call)
	if err != nil {
		t.Fatalf("GetPods past the fence: %v; reads are not fenced", err)
	}
	if len(pods) != 0 {
		t.Errorf("the backend has %d pods after a refused CreatePod", len(pods))
	}

	free := build(ctx, "vk-free")
	if err := free.Pods.CreatePod(call, pod.DeepCopy()); err != nil {
		t.Fatalf("CreatePod without a fence: %v", err)
	}
	if pods, err := free.Pods.GetPods(call); err != nil || len(pods) != 1 {
		t.Errorf("without a fence the backend has %d pods (%v), want the one created", len(pods), err)
	}
}
