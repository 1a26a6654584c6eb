package slurm

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
)

// ReasonJobHeld is the reason of a pod whose job Slurm holds: the pod's
// status, its waiting containers' and the Warning Event the provider
// records once the hold begins. A held job stays PENDING until released
// (scontrol release), so without it the pod would wait with no word of why.
const ReasonJobHeld = "SlurmJobHeld"

// jobHeld reports whether a pending job's reason is a hold: JobHeldAdmin,
// JobHeldUser, or a launch that failed too often and was requeued held
// (launch_failed_requeued_held; "job_requeued_in_held_state" and the
// like).
func jobHeld(reason string) bool {
	return strings.HasPrefix(reason, "JobHeld") || strings.Contains(strings.ToLower(reason), "held")
}

// heldMessage says who holds the job and what releases it.
func heldMessage(j *job) string {
	why := "Slurm holds job " + j.jobID() + " (" + j.Reason + ")"
	switch {
	case j.Reason == "JobHeldUser":
		why += ", held by its user"
	case j.Reason == "JobHeldAdmin":
		why += ", held by an administrator"
	case strings.Contains(strings.ToLower(j.Reason), "launch"):
		why += ": its launch on a node failed (see that node's slurmd log)"
	}
	return why + "; it starts only once released (scontrol release " + j.jobID() + ")"
}

// recordHold records a Warning Event on the pod when its status says its
// job became held; p.mu must be held.
func (p *Provider) recordHold(pod *corev1.Pod, old, s corev1.PodStatus) {
	if p.events == nil || s.Reason != ReasonJobHeld || old.Reason == ReasonJobHeld {
		return
	}
	p.events.Event(pod, corev1.EventTypeWarning, ReasonJobHeld, s.Message)
}
