package mock

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestStopSignalInStatus: the mock keeps a container's lifecycle.stopSignal
// and reports it as the container's stop signal, through an image update
// too; a container without one reports none.
func TestStopSignalInStatus(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	pod := testPod("usr1", nil, corev1.RestartPolicyAlways)
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGUSR1)}
	pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: "plain", Image: "busybox"})
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	check := func(when string) {
		t.Helper()
		s, err := p.GetPodStatus(ctx, "ns", "usr1")
		if err != nil {
			t.Fatal(err)
		}
		for _, cs := range s.ContainerStatuses {
			switch {
			case cs.Name == "app" && (cs.StopSignal == nil || *cs.StopSignal != corev1.SIGUSR1):
				t.Errorf("%s: app's stopSignal = %v, want SIGUSR1", when, cs.StopSignal)
			case cs.Name == "plain" && cs.StopSignal != nil:
				t.Errorf("%s: plain's stopSignal = %v, want none", when, *cs.StopSignal)
			}
		}
	}
	check("created")
	updated := pod.DeepCopy()
	updated.Spec.Containers[0].Image = "busybox:2"
	if err := p.UpdatePod(ctx, updated); err != nil {
		t.Fatal(err)
	}
	check("after an image update")
}
