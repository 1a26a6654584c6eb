//go:build e2e

package pods_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestRestartRules: a container with restartPolicy Never and a rule to
// restart on exit code 42 (KEP-5307, ContainerRestartRules, on in 1.36),
// in a pod whose restartPolicy is Never, is restarted when it exits 42,
// the pod staying Running, and not when it exits 1, the pod then Failed:
// as a kubelet decides.
func TestRestartRules(t *testing.T) {
	c, ns, d := daemontest.ReadyMockNode(t)

	ruled := func(name, code string) *corev1.Pod {
		pod := daemontest.MockPod(name, d.Name, corev1.RestartPolicyNever, map[string]string{
			mock.AnnotationRunFor: "1s", mock.AnnotationExitCode: code, mock.AnnotationRestartDelay: "500ms",
		})
		pod.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
		pod.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{
			Action:    corev1.ContainerRestartRuleActionRestart,
			ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
		}}
		return pod
	}
	daemontest.CreateGated(t, c, ns, "restartPolicyRules", func(p *corev1.Pod) bool {
		return len(p.Spec.Containers[0].RestartPolicyRules) > 0
	}, ruled("exits-42", "42"), ruled("exits-1", "1"))

	pod := daemontest.WaitPod(t, c.Client, ns, "exits-42", "restarted twice by its rule", func(p *corev1.Pod) bool {
		return daemontest.MainContainer(p).RestartCount >= 2
	})
	cs := daemontest.MainContainer(pod)
	if last := cs.LastTerminationState.Terminated; last == nil || last.ExitCode != 42 {
		t.Errorf("last termination %+v, want exit code 42", cs.LastTerminationState)
	}
	if pod.Status.Phase != corev1.PodRunning {
		t.Errorf("a pod whose container restarts by its rule is %s, want Running", pod.Status.Phase)
	}

	pod = daemontest.WaitPod(t, c.Client, ns, "exits-1", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	cs = daemontest.MainContainer(pod)
	if term := cs.State.Terminated; cs.RestartCount != 0 || term == nil || term.ExitCode != 1 {
		t.Errorf("exit 1 under a rule for 42: %d restarts, state %+v; want none, terminated with 1", cs.RestartCount, cs.State)
	}
}
