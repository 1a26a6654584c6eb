package mock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	utilexec "k8s.io/utils/exec"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// TestTokenIsRequestedWhenRead: the mock reads tokens on read, so a pod's
// token is requested by the first `cat` of its file, not by testing for
// it or its directory; a failed request is the reader's error, and the next
// read tries again.
func TestTokenIsRequestedWhenRead(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	if !p.ReadsTokensOnRead() {
		t.Fatal("the mock does not read tokens on read")
	}
	requests, refuse := 0, true
	client := fake.NewClientset()
	client.PrependReactor("create", "serviceaccounts", func(action k8stesting.Action) (bool, runtime.Object, error) {
		requests++
		if refuse {
			return true, nil, errors.New("the API server is away")
		}
		tr := action.(k8stesting.CreateAction).GetObject().(*authenticationv1.TokenRequest).DeepCopy()
		tr.Status.Token = "issued-token"
		tr.Status.ExpirationTimestamp = metav1.NewTime(time.Now().Add(time.Hour))
		return true, tr, nil
	})
	const dir = "/var/run/secrets/kubernetes.io/serviceaccount"
	pod := testPod("web", nil, corev1.RestartPolicyAlways)
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "kube-api-access", MountPath: dir}}
	token := volume.NewTokens(client.CoreV1(), 0).OnRead(pod, "", 3600)
	contents := &volume.Contents{Volumes: []volume.Volume{{Name: "kube-api-access", Files: []volume.File{
		{Path: "namespace", Data: "ns", Mode: volume.DefaultMode}, {Path: "token", Mode: volume.DefaultMode, Token: token}}}}}
	if err := p.SetPodVolumes(ctx, pod, contents); err != nil {
		t.Fatal(err)
	}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	run := func(cmd ...string) (string, string, int) {
		io := &fakeIO{stdout: &closeBuffer{}, stderr: &closeBuffer{}}
		err := p.RunInContainer(ctx, "ns", "web", "app", cmd, io)
		var exit utilexec.ExitError
		if errors.As(err, &exit) {
			return io.stdout.String(), io.stderr.String(), exit.ExitStatus()
		} else if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return io.stdout.String(), io.stderr.String(), 0
	}

	if _, _, code := run("test", "-f", dir+"/token"); code != 0 {
		t.Errorf("test -f on the token file: exit %d", code)
	}
	if _, _, code := run("test", "-d", dir); code != 0 {
		t.Errorf("test -d on the token's directory: exit %d", code)
	}
	if requests != 0 {
		t.Fatalf("%d token requests before anything read the token", requests)
	}
	if _, stderr, code := run("cat", dir+"/token"); code != 1 || !strings.Contains(stderr, "cat: reading token: requesting a token for service account ns/default: the API server is away") {
		t.Errorf("cat of a token the API server does not issue: exit %d, %q", code, stderr)
	}
	if _, stderr, code := run("tar", "cf", "-", dir); code != 2 || !strings.Contains(stderr, "the API server is away") {
		t.Errorf("tar of a token the API server does not issue: exit %d, %q", code, stderr)
	}
	refuse = false
	for range 2 {
		if out, stderr, code := run("cat", dir+"/token"); code != 0 || out != "issued-token" {
			t.Errorf("cat of the token: exit %d, %q %q", code, out, stderr)
		}
	}
	if requests != 3 {
		t.Errorf("%d token requests; want the two refused and one for both reads", requests)
	}
}

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
