package mock

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// TestRestartRules: a container with restartPolicy Never and a rule to
// restart on exit code 42 is restarted when it exits 42, and not when it
// exits 1, its pod then Failed (KEP-5307, as the kubelet decides).
func TestRestartRules(t *testing.T) {
	for _, tc := range []struct {
		code     string
		restarts bool
	}{{"42", true}, {"1", false}} {
		t.Run("exit "+tc.code, func(t *testing.T) {
			p, r := newProvider(t)
			pod := testPod("ruled", map[string]string{AnnotationRunFor: "20ms", AnnotationExitCode: tc.code, AnnotationRestartDelay: "10ms"}, corev1.RestartPolicyNever)
			pod.Spec.Containers[0].RestartPolicy = ptr.To(corev1.ContainerRestartPolicyNever)
			pod.Spec.Containers[0].RestartPolicyRules = []corev1.ContainerRestartRule{{
				Action:    corev1.ContainerRestartRuleActionRestart,
				ExitCodes: &corev1.ContainerRestartRuleOnExitCodes{Operator: corev1.ContainerRestartRuleOnExitCodesOpIn, Values: []int32{42}},
			}}
			if err := p.CreatePod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if tc.restarts {
				got := r.waitFor(t, "restarted twice", func(p *corev1.Pod) bool { return p.Status.ContainerStatuses[0].RestartCount >= 2 })
				if got.Status.Phase != corev1.PodRunning {
					t.Errorf("a container restarting by its rule leaves the pod %s, want Running", got.Status.Phase)
				}
				return
			}
			got := r.waitFor(t, "terminal", func(p *corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning })
			if cs := got.Status.ContainerStatuses[0]; got.Status.Phase != corev1.PodFailed || cs.RestartCount != 0 {
				t.Errorf("exit 1 under a rule for 42: phase %s, %d restarts, want Failed without restarts", got.Status.Phase, cs.RestartCount)
			}
		})
	}
}
