package mock

import (
	"context"
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/intern"
	"github.com/vkubelet/virtual-kubelet/provider"
)

func sameMap(a, b any) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

// recordOf returns the mock's record of the pod ns/name.
func recordOf(t *testing.T, p *Provider, name string) *podState {
	t.Helper()
	p.mu.Lock()
	defer p.mu.Unlock()
	ps := p.pods[podKey("ns", name)]
	if ps == nil {
		t.Fatalf("no record of pod %s", name)
	}
	return ps
}

// TestRecordsHoldTheCachesInstances: the mocks of a process, given the
// daemon's Interner, keep the informer cache's instances of a pod's labels
// and environment, not the copies the controller hands them.
func TestRecordsHoldTheCachesInstances(t *testing.T) {
	in := intern.New()
	cached := testPod("web", nil, corev1.RestartPolicyAlways)
	cached.Labels = map[string]string{"app": "web"}
	in.Pod(cached) // the informer's transform
	for _, nodeName := range []string{"vk0", "vk1"} {
		p, err := New(context.Background(), provider.InitConfig{NodeName: nodeName, OperatingSystem: "linux", Interner: in})
		if err != nil {
			t.Fatal(err)
		}
		// The controller hands the provider a copy.
		if err := p.CreatePod(context.Background(), cached.DeepCopy()); err != nil {
			t.Fatal(err)
		}
		ps := recordOf(t, p.(*Provider), "web")
		if !sameMap(ps.pod.labels, cached.Labels) {
			t.Errorf("%s: the mock keeps its own copy of the labels", nodeName)
		}
		if &ps.containers[0].spec.env[0] != &cached.Spec.Containers[0].Env[0] {
			t.Errorf("%s: the mock keeps its own copy of the environment", nodeName)
		}
	}
}

// TestRecordsShareWithoutTheDaemonsInterner: built without one, the mock
// shares through its own.
func TestRecordsShareWithoutTheDaemonsInterner(t *testing.T) {
	p, _ := newProvider(t)
	for _, name := range []string{"a", "b"} {
		pod := testPod(name, nil, corev1.RestartPolicyAlways)
		pod.Labels = map[string]string{"app": "web"}
		if err := p.CreatePod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	if a, b := recordOf(t, p, "a"), recordOf(t, p, "b"); !sameMap(a.pod.labels, b.pod.labels) {
		t.Error("two pods' equal labels are kept twice")
	}
}
