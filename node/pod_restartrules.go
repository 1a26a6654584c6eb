package node

import (
	"slices"

	corev1 "k8s.io/api/core/v1"
)

// Container restart rules (KEP-5307, ContainerRestartRules: beta and on
// since Kubernetes 1.35): a container may carry its own restartPolicy and
// restartPolicyRules on its exit codes, which override the pod's
// restartPolicy for it. ContainerRestarts is the one decision, for the
// controller (a pod the provider lost) and for providers that restart
// containers themselves, so every part restarts a container as a 1.36
// kubelet would.

// lostExitCode is the exit code the kubelet reports of a container it
// cannot find (ContainerStatusUnknown): a lost container's.
const lostExitCode = 137

// ContainerRestarts reports whether container c of a pod of spec, which
// exited with exitCode, is started again, as the kubelet decides: the first
// of c's restartPolicyRules whose exitCodes match decides (action Restart);
// otherwise c's own restartPolicy; otherwise, for a container without one,
// the pod's restartPolicy (Always when unset). A RestartAllContainers rule
// falls through to c's restartPolicy, as on a kubelet without
// RestartAllContainersOnContainerExits: the node does not declare that
// feature, so the scheduler places no pod needing it here. A sidecar
// (restartPolicy Always) always restarts; an init container that exited 0
// is done whatever this says (the caller checks).
func ContainerRestarts(c *corev1.Container, spec *corev1.PodSpec, exitCode int32) bool {
	if c.RestartPolicy != nil {
		if rule, ok := matchingRestartRule(c.RestartPolicyRules, exitCode); ok && rule.Action == corev1.ContainerRestartRuleActionRestart {
			return true
		}
		switch *c.RestartPolicy {
		case corev1.ContainerRestartPolicyAlways:
			return true
		case corev1.ContainerRestartPolicyOnFailure:
			return exitCode != 0
		case corev1.ContainerRestartPolicyNever:
			return false
		}
	}
	switch spec.RestartPolicy {
	case corev1.RestartPolicyOnFailure:
		return exitCode != 0
	case corev1.RestartPolicyNever:
		return false
	}
	return true // Always, and the API's default
}

// matchingRestartRule is the first of rules whose exitCodes match
// exitCode: In lists it, NotIn does not. A rule with another operator, or
// none, matches nothing.
func matchingRestartRule(rules []corev1.ContainerRestartRule, exitCode int32) (corev1.ContainerRestartRule, bool) {
	for _, r := range rules {
		if r.ExitCodes == nil {
			continue
		}
		listed := slices.Contains(r.ExitCodes.Values, exitCode)
		switch r.ExitCodes.Operator {
		case corev1.ContainerRestartRuleOnExitCodesOpIn:
			if listed {
				return r, true
			}
		case corev1.ContainerRestartRuleOnExitCodesOpNotIn:
			if !listed {
				return r, true
			}
		}
	}
	return corev1.ContainerRestartRule{}, false
}

// lastExitCode is the exit code a container's loss leaves it with: its
// last run's when it had terminated, else that of a container the kubelet
// cannot find.
func lastExitCode(cs *corev1.ContainerStatus) int32 {
	if cs != nil && cs.State.Terminated != nil {
		return cs.State.Terminated.ExitCode
	}
	return lostExitCode
}
