package node

import (
	"fmt"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Reasons of the pod conditions the controller computes, as the kubelet
// words them.
const (
	ReasonContainersNotInitialized = "ContainersNotInitialized"
	ReasonContainersNotReady       = "ContainersNotReady"
	ReasonReadinessGatesNotReady   = "ReadinessGatesNotReady"
	ReasonPodCompleted             = "PodCompleted"
	ReasonPodFailed                = "PodFailed"
)

// withKubeletConditions returns the provider's status with the conditions a
// kubelet computes (PodReadyToStartContainers, Initialized, ContainersReady,
// Ready) added where the provider left them out, derived from its container
// statuses, the pod's init containers and readiness gates. A condition's
// transition time moves (to now) only when its status changes from the one
// in current, the status Kubernetes has.
func withKubeletConditions(pod *corev1.Pod, current, provider corev1.PodStatus, now metav1.Time) corev1.PodStatus {
	s := provider
	computed := []corev1.PodCondition{readyToStartCondition(&provider)}
	initialized := initializedCondition(pod, &provider)
	containersReady := containersReadyCondition(pod, &provider)
	computed = append(computed, initialized, containersReady, readyCondition(pod, containersReady, current.Conditions, provider.Conditions))

	var add []corev1.PodCondition
	for _, c := range computed {
		if hasCondition(provider.Conditions, c.Type) {
			continue
		}
		c.LastTransitionTime = now
		for _, old := range current.Conditions {
			if old.Type == c.Type && old.Status == c.Status {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		add = append(add, c)
	}
	if len(add) > 0 {
		s.Conditions = append(append([]corev1.PodCondition(nil), provider.Conditions...), add...)
	}
	return s
}

func condition(t corev1.PodConditionType, ok bool, reason, msg string) corev1.PodCondition {
	if ok {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue}
	}
	return corev1.PodCondition{Type: t, Status: corev1.ConditionFalse, Reason: reason, Message: msg}
}

// readyToStartCondition is true once the provider has set the pod up: some
// container has run, or waits for a reason other than being created.
func readyToStartCondition(s *corev1.PodStatus) corev1.PodCondition {
	ready := false
	for _, list := range [][]corev1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for _, c := range list {
			w := c.State.Waiting
			if w == nil || (w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing") {
				ready = true
			}
		}
	}
	return condition(corev1.PodReadyToStartContainers, ready, "", "")
}

// containerStatus is the status of the container name in list, nil when
// the list has none.
func containerStatus(list []corev1.ContainerStatus, name string) *corev1.ContainerStatus {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

func isSidecar(c *corev1.Container) bool {
	return c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways
}

// initializedCondition: every init container completed with exit code 0
// (sidecars: started), or an app container has started already.
func initializedCondition(pod *corev1.Pod, s *corev1.PodStatus) corev1.PodCondition {
	var unknown, incomplete []string
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		cs := containerStatus(s.InitContainerStatuses, c.Name)
		switch {
		case cs == nil:
			unknown = append(unknown, c.Name)
		case isSidecar(c):
			if cs.Started == nil || !*cs.Started {
				incomplete = append(incomplete, c.Name)
			}
		case cs.State.Terminated == nil || cs.State.Terminated.ExitCode != 0:
			incomplete = append(incomplete, c.Name)
		}
	}
	if len(unknown)+len(incomplete) == 0 || (s.Phase == corev1.PodSucceeded && len(unknown) == 0) {
		return condition(corev1.PodInitialized, true, "", "")
	}
	for _, cs := range s.ContainerStatuses {
		if cs.State.Running != nil || cs.State.Terminated != nil || cs.LastTerminationState.Terminated != nil {
			return condition(corev1.PodInitialized, true, "", "")
		}
	}
	return condition(corev1.PodInitialized, false, ReasonContainersNotInitialized, notReadyMessage(unknown, "unknown", incomplete, "incomplete"))
}

// containersReadyCondition: every app container and sidecar is ready.
func containersReadyCondition(pod *corev1.Pod, s *corev1.PodStatus) corev1.PodCondition {
	var unknown, unready []string
	check := func(name string, list []corev1.ContainerStatus) {
		if cs := containerStatus(list, name); cs == nil {
			unknown = append(unknown, name)
		} else if !cs.Ready {
			unready = append(unready, name)
		}
	}
	for i := range pod.Spec.InitContainers {
		if isSidecar(&pod.Spec.InitContainers[i]) {
			check(pod.Spec.InitContainers[i].Name, s.InitContainerStatuses)
		}
	}
	for _, c := range pod.Spec.Containers {
		check(c.Name, s.ContainerStatuses)
	}
	switch {
	case s.Phase == corev1.PodSucceeded && len(unknown) == 0:
		return condition(corev1.ContainersReady, false, ReasonPodCompleted, "")
	case s.Phase == corev1.PodFailed:
		return condition(corev1.ContainersReady, false, ReasonPodFailed, "")
	case len(unknown)+len(unready) > 0:
		return condition(corev1.ContainersReady, false, ReasonContainersNotReady, notReadyMessage(unknown, "unknown", unready, "unready"))
	}
	return condition(corev1.ContainersReady, true, "", "")
}

// readyCondition: the containers are ready and every readiness gate's
// condition (set by others, so looked up in both statuses) is True.
func readyCondition(pod *corev1.Pod, containersReady corev1.PodCondition, current, provider []corev1.PodCondition) corev1.PodCondition {
	if containersReady.Status != corev1.ConditionTrue {
		c := containersReady
		c.Type = corev1.PodReady
		return c
	}
	var msgs []string
	for _, gate := range pod.Spec.ReadinessGates {
		var found *corev1.PodCondition
		for _, conds := range [][]corev1.PodCondition{provider, current} {
			for i := range conds {
				if conds[i].Type == gate.ConditionType && found == nil {
					found = &conds[i]
				}
			}
		}
		switch {
		case found == nil:
			msgs = append(msgs, fmt.Sprintf("corresponding condition of pod readiness gate %q does not exist.", gate.ConditionType))
		case found.Status != corev1.ConditionTrue:
			msgs = append(msgs, fmt.Sprintf("the status of pod readiness gate %q is not \"True\", but %v", gate.ConditionType, found.Status))
		}
	}
	if len(msgs) > 0 {
		return condition(corev1.PodReady, false, ReasonReadinessGatesNotReady, strings.Join(msgs, ", "))
	}
	return condition(corev1.PodReady, true, "", "")
}

func notReadyMessage(a []string, aWhat string, b []string, bWhat string) string {
	var msgs []string
	if len(a) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with %s status: %v", aWhat, a))
	}
	if len(b) > 0 {
		msgs = append(msgs, fmt.Sprintf("containers with %s status: %v", bWhat, b))
	}
	return strings.Join(msgs, ", ")
}
