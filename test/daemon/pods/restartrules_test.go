//go:build e2e

package pods_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestRestartRules: a container with restartPolicy Never and a rule to
// restart on exit code 42 (KEP-5307, ContainerRestartRules, on in 1.36),
// in a pod whose restartPolicy is Never, is restarted when it exits 42,
// the pod staying Running, and not when it exits 1, the pod then Failed:
// as a kubelet decides.
func TestRestartRules(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	d := daemontest.Start(t, c, nil)
	daemontest.WaitNodeReady(t, c.Client, d.Name)

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
	daemontest.CreatePods(t, c.Client, ns, ruled("exits-42", "42"), ruled("exits-1", "1"))
	created, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "exits-42", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(created.Spec.Containers[0].RestartPolicyRules) == 0 {
		t.Fatalf("the API server dropped restartPolicyRules: the control plane runs without --feature-gates=%s", controlplane.FeatureGates)
	}

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
