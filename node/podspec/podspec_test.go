package podspec_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/podspec"
)

// The containers point into the pod: a change through one is the pod's.
func TestAllContainersPointIntoThePod(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "init"}},
		Containers:     []corev1.Container{{Name: "main"}},
	}}
	for _, c := range podspec.AllContainers(pod) {
		c.Image = c.Name + "-image"
	}
	if pod.Spec.InitContainers[0].Image != "init-image" || pod.Spec.Containers[0].Image != "main-image" {
		t.Errorf("images %q, %q; want the pod's own containers changed", pod.Spec.InitContainers[0].Image, pod.Spec.Containers[0].Image)
	}
	if got := podspec.AllContainers(&corev1.Pod{}); len(got) != 0 {
		t.Errorf("a pod without containers: %d containers", len(got))
	}
}
