//go:build e2e

package e2e_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
)

// TestStopSignal: a container whose lifecycle.stopSignal is SIGUSR1 gets
// USR1, not TERM, when its pod is deleted (its traps write which to its
// log, which kubectl logs shows while the pod terminates), and
// containerStatuses[].stopSignal reports SIGUSR1; a container of the same
// pod without one gets TERM.
func TestStopSignal(t *testing.T) {
	n, _, ns := slurmtest.RunningNode(t)
	c, ctx := n.C, context.Background()
	const traps = `trap 'echo got USR1; sleep 30; exit 0' USR1
trap 'echo got TERM; sleep 30; exit 0' TERM
echo ready
while :; do sleep 0.2; done`
	usr1 := slurmtest.Shell("usr1", traps)
	usr1.Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGUSR1)}
	pod := n.Pod(ns, "stop", usr1, slurmtest.Shell("term", traps))
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
	n.Create(t, pod)
	running := n.WaitPod(t, ns, "stop", "Running with both containers ready to trap", func(p *corev1.Pod) bool {
		if p.Status.Phase != corev1.PodRunning {
			return false
		}
		for _, name := range []string{"usr1", "term"} {
			if out, _ := c.Kubectl(ctx, "-n", ns, "logs", "stop", "-c", name); out != "ready\n" {
				return false
			}
		}
		return true
	})
	for _, s := range running.Status.ContainerStatuses {
		want := map[string]*corev1.Signal{"usr1": ptr.To(corev1.SIGUSR1), "term": nil}[s.Name]
		if (s.StopSignal == nil) != (want == nil) || (want != nil && *s.StopSignal != *want) {
			t.Errorf("container %s: stopSignal %v, want %v", s.Name, s.StopSignal, want)
		}
	}

	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "stop", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]string{"usr1": "ready\ngot USR1\n", "term": "ready\ngot TERM\n"} {
		slurmtest.Eventually(t, "container "+name+" logs the signal it got", func() (bool, string) {
			out, _ := c.Kubectl(ctx, "-n", ns, "logs", "stop", "-c", name)
			return out == want, out
		})
	}
	if out, _ := c.Kubectl(ctx, "-n", ns, "logs", "stop", "-c", "usr1"); strings.Contains(out, "TERM") {
		t.Errorf("the SIGUSR1 container got TERM too:\n%s", out)
	}
}
