package node

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// ruled is a container with its own restartPolicy and rules.
func ruled(policy corev1.ContainerRestartPolicy, rules ...corev1.ContainerRestartRule) corev1.Container {
	return corev1.Container{Name: "c", RestartPolicy: ptr.To(policy), RestartPolicyRules: rules}
}

func onExit(action corev1.ContainerRestartRuleAction, op corev1.ContainerRestartRuleOnExitCodesOperator, codes ...int32) corev1.ContainerRestartRule {
	return corev1.ContainerRestartRule{Action: action, ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: op, Values: codes}}
}

// TestContainerRestarts: the kubelet's decision, rule by rule (KEP-5307).
func TestContainerRestarts(t *testing.T) {
	restartOn42 := onExit(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpIn, 42)
	for _, tc := range []struct {
		name string
		c    corev1.Container
		pod  corev1.RestartPolicy
		code int32
		want bool
	}{
		{"pod Always", corev1.Container{}, corev1.RestartPolicyAlways, 0, true},
		{"pod default is Always", corev1.Container{}, "", 0, true},
		{"pod OnFailure, exit 0", corev1.Container{}, corev1.RestartPolicyOnFailure, 0, false},
		{"pod OnFailure, exit 1", corev1.Container{}, corev1.RestartPolicyOnFailure, 1, true},
		{"pod Never", corev1.Container{}, corev1.RestartPolicyNever, 1, false},
		{"rule In matches", ruled(corev1.ContainerRestartPolicyNever, restartOn42), corev1.RestartPolicyNever, 42, true},
		{"rule In does not match: container Never", ruled(corev1.ContainerRestartPolicyNever, restartOn42), corev1.RestartPolicyAlways, 1, false},
		{"container OnFailure overrides pod Never", ruled(corev1.ContainerRestartPolicyOnFailure), corev1.RestartPolicyNever, 3, true},
		{"container Always overrides pod Never", ruled(corev1.ContainerRestartPolicyAlways), corev1.RestartPolicyNever, 0, true},
		{"rule NotIn matches", ruled(corev1.ContainerRestartPolicyNever,
			onExit(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 1)), corev1.RestartPolicyNever, 7, true},
		{"rule NotIn does not match", ruled(corev1.ContainerRestartPolicyNever,
			onExit(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpNotIn, 0, 1)), corev1.RestartPolicyNever, 1, false},
		{"first matching rule decides", ruled(corev1.ContainerRestartPolicyNever,
			onExit("DoNothing", corev1.ContainerRestartRuleOnExitCodesOpIn, 42), restartOn42), corev1.RestartPolicyNever, 42, false},
		{"RestartAllContainers falls through to the container's policy", ruled(corev1.ContainerRestartPolicyNever,
			onExit(corev1.ContainerRestartRuleActionRestartAllContainers, corev1.ContainerRestartRuleOnExitCodesOpIn, 42)), corev1.RestartPolicyAlways, 42, false},
		{"rule without exit codes matches nothing", ruled(corev1.ContainerRestartPolicyNever, corev1.ContainerRestartRule{Action: corev1.ContainerRestartRuleActionRestart}), corev1.RestartPolicyNever, 42, false},
		{"rules need the container's policy", corev1.Container{RestartPolicyRules: []corev1.ContainerRestartRule{restartOn42}}, corev1.RestartPolicyNever, 42, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := ContainerRestarts(&tc.c, &corev1.PodSpec{RestartPolicy: tc.pod}, tc.code); got != tc.want {
				t.Errorf("ContainerRestarts(exit %d) = %v, want %v", tc.code, got, tc.want)
			}
		})
	}
}

// TestOnLossFollowsRestartRules: a lost pod is created again as its
// containers' rules say, given each one's last exit code (137 for one that
// was running).
func TestOnLossFollowsRestartRules(t *testing.T) {
	restartOn42 := onExit(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpIn, 42)
	restartOnLoss := onExit(corev1.ContainerRestartRuleActionRestart, corev1.ContainerRestartRuleOnExitCodesOpIn, lostExitCode)
	for _, tc := range []struct {
		name   string
		rule   corev1.ContainerRestartRule
		status corev1.ContainerStatus
		want   lossOutcome
	}{
		{"exited 42, restart on 42", restartOn42, exited("c", 42), lossRestarts},
		{"exited 1, restart on 42", restartOn42, exited("c", 1), lossFails},
		{"running, restart on 42", restartOn42, running("c", true), lossFails},
		{"running, restart on 137", restartOnLoss, running("c", true), lossRestarts},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("u1", podRunning)
			pod.Spec.RestartPolicy = corev1.RestartPolicyNever
			pod.Spec.Containers = []corev1.Container{ruled(corev1.ContainerRestartPolicyNever, tc.rule)}
			if got := onLoss(pod, &corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{tc.status}}); got != tc.want {
				t.Errorf("onLoss = %d, want %d", got, tc.want)
			}
		})
	}
}
