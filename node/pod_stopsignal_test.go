package node

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestWithStopSignals: a container whose spec sets lifecycle.stopSignal
// shows it in containerStatuses[].stopSignal when the provider reports
// none; a provider's own report wins; a container without one is left
// alone; the statuses handed in are not changed.
func TestWithStopSignals(t *testing.T) {
	usr1 := corev1.SIGUSR1
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "sidecar", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways),
			Lifecycle: &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGQUIT)}}},
		Containers: []corev1.Container{
			{Name: "usr1", Lifecycle: &corev1.Lifecycle{StopSignal: &usr1}},
			{Name: "plain"},
			{Name: "reported", Lifecycle: &corev1.Lifecycle{StopSignal: &usr1}},
		},
	}}
	in := corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{{Name: "sidecar"}},
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "usr1"}, {Name: "plain"}, {Name: "reported", StopSignal: ptr.To(corev1.SIGINT)},
		},
	}
	out := withStopSignals(pod, in)
	want := map[string]*corev1.Signal{"sidecar": ptr.To(corev1.SIGQUIT), "usr1": &usr1, "plain": nil, "reported": ptr.To(corev1.SIGINT)}
	for _, cs := range append(out.InitContainerStatuses, out.ContainerStatuses...) {
		if got, w := cs.StopSignal, want[cs.Name]; (got == nil) != (w == nil) || got != nil && *got != *w {
			t.Errorf("%s stopSignal = %v, want %v", cs.Name, ptr.Deref(got, "<nil>"), ptr.Deref(w, "<nil>"))
		}
	}
	if in.ContainerStatuses[0].StopSignal != nil || in.InitContainerStatuses[0].StopSignal != nil {
		t.Error("the statuses handed in were changed")
	}
	if empty := withStopSignals(pod, corev1.PodStatus{}); empty.ContainerStatuses != nil {
		t.Errorf("no statuses became %+v", empty.ContainerStatuses)
	}
}
