package node

import (
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// lossOutcome is what becomes of a pod the provider lost.
type lossOutcome int

const (
	// lossFails: the pod ends Failed (ProviderLost).
	lossFails lossOutcome = iota
	// lossRestarts: the pod is created again in the provider, each
	// container's restart counted.
	lossRestarts
)

// onLoss decides for a pod the provider lost, as a kubelet whose runtime
// lost a pod's containers does: they are started again if any of its app
// containers would be (ContainerRestarts), given the exit code it last
// terminated with, or that of a container the kubelet cannot find (137)
// if it was still running. Under the pod's restartPolicy alone that is:
// Always restarts, Never does not, OnFailure does unless every container
// had exited 0. A pod being deleted is not started again.
func onLoss(pod *corev1.Pod, status *corev1.PodStatus) lossOutcome {
	if pod.DeletionTimestamp != nil {
		return lossFails
	}
	for i := range pod.Spec.Containers {
		c := &pod.Spec.Containers[i]
		if ContainerRestarts(c, &pod.Spec, lastExitCode(containerStatus(status.ContainerStatuses, c.Name))) {
			return lossRestarts
		}
	}
	return lossFails
}

// containerRestarts are, by container name, what the controller adds to the
// status the provider reports of a pod's containers.
type containerRestarts map[string]containerRestart

// containerRestart is one container's restarts the provider does not
// count, and the state its last run ended in, for a provider reporting none.
type containerRestart struct {
	count int32
	last  *corev1.ContainerStateTerminated
}

// restartsAfterLoss are the restarts of a pod created again after the
// provider lost it: one more than status shows for each of its init and
// app containers, whose last run ended as the kubelet reports a container
// it cannot find (ContainerStatusUnknown, exit code 137).
func restartsAfterLoss(pod *corev1.Pod, status *corev1.PodStatus, now metav1.Time) containerRestarts {
	out := containerRestarts{}
	add := func(specs []corev1.Container, statuses []corev1.ContainerStatus) {
		for _, c := range specs {
			r := containerRestart{count: 1, last: &corev1.ContainerStateTerminated{
				ExitCode: 137, Reason: "ContainerStatusUnknown", FinishedAt: now,
				Message: "The container could not be located when the provider lost the pod",
			}}
			if cs := containerStatus(statuses, c.Name); cs != nil {
				r.count += cs.RestartCount
				if run := cs.State.Running; run != nil {
					r.last.StartedAt = run.StartedAt
				}
			}
			out[c.Name] = r
		}
	}
	add(pod.Spec.InitContainers, status.InitContainerStatuses)
	add(pod.Spec.Containers, status.ContainerStatuses)
	return out
}

// uncountedRestarts are the restarts the API server shows (known) that a
// provider's status of an adopted pod (reported) does not: a provider that
// created the pod again after a loss counts from zero. Nil when none.
func uncountedRestarts(known, reported *corev1.PodStatus) containerRestarts {
	var out containerRestarts
	for _, lists := range [][2][]corev1.ContainerStatus{
		{known.InitContainerStatuses, reported.InitContainerStatuses},
		{known.ContainerStatuses, reported.ContainerStatuses},
	} {
		for _, k := range lists[0] {
			r := containerStatus(lists[1], k.Name)
			if r == nil || k.RestartCount <= r.RestartCount {
				continue
			}
			if out == nil {
				out = containerRestarts{}
			}
			out[k.Name] = containerRestart{count: k.RestartCount - r.RestartCount}
		}
	}
	return out
}

// apply returns status with the restarts added (status itself when there
// are none): each container's restart count, and its last state where the
// provider reports none.
func (cr containerRestarts) apply(status *corev1.PodStatus) *corev1.PodStatus {
	if len(cr) == 0 {
		return status
	}
	out := status.DeepCopy()
	for _, list := range [][]corev1.ContainerStatus{out.InitContainerStatuses, out.ContainerStatuses} {
		for i := range list {
			r, ok := cr[list[i].Name]
			if !ok {
				continue
			}
			list[i].RestartCount += r.count
			if r.last != nil && list[i].LastTerminationState.Terminated == nil {
				list[i].LastTerminationState = corev1.ContainerState{Terminated: r.last.DeepCopy()}
			}
		}
	}
	return out
}
