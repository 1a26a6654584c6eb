package node

import (
	corev1 "k8s.io/api/core/v1"
)

// withStopSignals returns status with containerStatuses[].stopSignal, the
// signal a container's stop sends, filled in from the container's
// lifecycle.stopSignal where the provider reports none, as the kubelet
// reports the runtime's effective stop signal. A container without one in
// its spec is left as the provider reports it: the default (the image's, or
// SIGTERM) is the backend's to know, and the field exists only while the
// ContainerStopSignals gate (alpha in 1.36) is on, which a spec carrying a
// stop signal shows. status's lists are not changed in place.
func withStopSignals(pod *corev1.Pod, status corev1.PodStatus) corev1.PodStatus {
	status.InitContainerStatuses = stopSignalsOf(pod.Spec.InitContainers, status.InitContainerStatuses)
	status.ContainerStatuses = stopSignalsOf(pod.Spec.Containers, status.ContainerStatuses)
	return status
}

// stopSignalsOf returns statuses with the stop signals of specs filled in,
// a copy if any is.
func stopSignalsOf(specs []corev1.Container, statuses []corev1.ContainerStatus) []corev1.ContainerStatus {
	out := statuses
	for i := range statuses {
		if statuses[i].StopSignal != nil {
			continue
		}
		sig := specStopSignal(specs, statuses[i].Name)
		if sig == nil {
			continue
		}
		if &out[0] == &statuses[0] {
			out = append([]corev1.ContainerStatus(nil), statuses...)
		}
		out[i].StopSignal = sig
	}
	return out
}

// specStopSignal is the lifecycle.stopSignal of the container named name
// in specs, nil when it sets none.
func specStopSignal(specs []corev1.Container, name string) *corev1.Signal {
	for i := range specs {
		if specs[i].Name == name && specs[i].Lifecycle != nil && specs[i].Lifecycle.StopSignal != nil {
			sig := *specs[i].Lifecycle.StopSignal
			return &sig
		}
	}
	return nil
}
