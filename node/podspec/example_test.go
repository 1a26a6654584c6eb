package podspec_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/podspec"
)

func ExampleAllContainers() {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "setup"}, {Name: "sidecar"}},
		Containers:     []corev1.Container{{Name: "main"}},
	}}
	for _, c := range podspec.AllContainers(pod) {
		fmt.Println(c.Name)
	}
	// Output:
	// setup
	// sidecar
	// main
}
