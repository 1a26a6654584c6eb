package node

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// stopDeadline is when the controller stops waiting for the provider to
// confirm a deleted pod stopped: its deletion timestamp (the API server's
// "now + grace period") plus the margin, or the margin after the provider
// was told, if that was later (a restart of this process after the grace
// period ended still gives the provider its margin).
func (pc *PodController) stopDeadline(pod *corev1.Pod, rec *podRecord) time.Time {
	end := pod.DeletionTimestamp.Time
	if told := rec.view().deletedAt; told.After(end) {
		end = told
	}
	return end.Add(pc.graceMargin)
}

// stopUnconfirmed gives a deleting pod whose provider has not confirmed the
// stop by its deadline a terminal status of the controller's own, as the
// kubelet reports containers it had to kill, and records why. It returns the
// pod to write as if the provider had reported it.
func (pc *PodController) stopUnconfirmed(ctx context.Context, pod *corev1.Pod, rec *podRecord, current *corev1.PodStatus) *corev1.Pod {
	grace := ptr.Deref(pod.DeletionGracePeriodSeconds, 0)
	msg := fmt.Sprintf("The provider did not confirm the pod stopped within its %ds grace period and a %s margin", grace, pc.graceMargin)
	log.G(ctx).Warn(msg + "; marking it terminated")
	pc.recorder.Event(pod, corev1.EventTypeWarning, ReasonProviderDidNotStop, msg)
	pp := withStatus(pod, terminatedStatus(pod, *current, ReasonProviderDidNotStop, msg, ReasonProviderDidNotStop, msg))
	rec.stopForcedWith(pp)
	return pp
}

// terminatedStatus is s with the pod Failed for reason and every container
// that has not terminated terminated with exit code 137, as a killed
// container is, including containers the status never mentioned.
func terminatedStatus(pod *corev1.Pod, s corev1.PodStatus, reason, message, containerReason, containerMessage string) corev1.PodStatus {
	s = *s.DeepCopy()
	now := metav1.Now()
	s.Phase = corev1.PodFailed
	s.Reason, s.Message = reason, message
	for _, c := range pod.Spec.Containers {
		if containerStatus(s.ContainerStatuses, c.Name) == nil {
			s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{Name: c.Name, Image: c.Image})
		}
	}
	for i := range s.ContainerStatuses {
		c := &s.ContainerStatuses[i]
		if c.State.Terminated != nil {
			continue
		}
		started := metav1.Time{}
		if c.State.Running != nil {
			started = c.State.Running.StartedAt
		}
		c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode:    137,
			Reason:      containerReason,
			Message:     containerMessage,
			StartedAt:   started,
			FinishedAt:  now,
			ContainerID: c.ContainerID,
		}}
		c.Ready = false
		c.Started = ptr.To(false)
	}
	for i := range s.Conditions {
		if t := s.Conditions[i].Type; (t == corev1.PodReady || t == corev1.ContainersReady) && s.Conditions[i].Status != corev1.ConditionFalse {
			s.Conditions[i].Status = corev1.ConditionFalse
			s.Conditions[i].LastTransitionTime = now
		}
	}
	return s
}
