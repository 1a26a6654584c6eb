package node

import (
	corev1 "k8s.io/api/core/v1"
)

// generationToObserve is the pod's metadata.generation a status written
// now shows the node acted on: the generation whose spec was last decided
// for the provider, or, for a status the controller has to write before it
// handed the pod over (a configuration error, a pod the provider already
// ran when the daemon started), the pod's own, which that decision was made
// on. Zero (nothing acted on) leaves the status's generation alone.
func generationToObserve(pod *corev1.Pod, st podState, toWrite bool) int64 {
	if gen := st.generationActedOn(pod.UID); gen > 0 {
		return gen
	}
	if toWrite {
		return pod.Generation
	}
	return 0
}

// withObservedGeneration returns status with gen, the generation acted on,
// as the kubelet writes it (pod generation tracking, GA in 1.35): in
// status.observedGeneration, never lower than the one current shows, and
// in the observedGeneration of every condition the kubelet owns. The
// resize conditions keep the generation of the resize they describe, and
// conditions of other owners are theirs.
func withObservedGeneration(status corev1.PodStatus, current *corev1.PodStatus, gen int64) corev1.PodStatus {
	if gen <= 0 {
		return status
	}
	status.ObservedGeneration = max(gen, current.ObservedGeneration)
	conds := make([]corev1.PodCondition, len(status.Conditions))
	for i, c := range status.Conditions {
		if stampedByKubelet(c.Type) {
			c.ObservedGeneration = gen
		}
		conds[i] = c
	}
	status.Conditions = conds
	return status
}

// stampedByKubelet reports whether the kubelet writes conditions of type t
// with the pod generation its status was made from. PodScheduled is among
// them: the API server's binding sets it without a generation, and the
// kubelet's next status write adds it.
func stampedByKubelet(t corev1.PodConditionType) bool {
	switch t {
	case corev1.PodScheduled, corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady:
		return true
	}
	return false
}
