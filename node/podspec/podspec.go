// Package podspec reads a pod's spec as the kubelet does. It is its own
// package, importing nothing of node's, so that node, node/volume and
// the plugin wire format (which node imports, or which import node) share
// one reading.
package podspec

import corev1 "k8s.io/api/core/v1"

// AllContainers are the pod's init containers, then its app containers,
// in the order of its spec; each points into the pod. Ephemeral
// containers are not among them: no provider runs them.
func AllContainers(pod *corev1.Pod) []*corev1.Container {
	out := make([]*corev1.Container, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for i := range pod.Spec.InitContainers {
		out = append(out, &pod.Spec.InitContainers[i])
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}
