//go:build e2e

package pods_test

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
)

// TestStopSignalReported checks that a container with lifecycle.stopSignal SIGUSR1
// on the mock shows it in containerStatuses[].stopSignal, the signal its
// stop sends, as a kubelet reports the runtime's effective one.
func TestStopSignalReported(t *testing.T) {
	c, ns, d := daemontest.ReadyMockNode(t)

	pod := daemontest.MockPod("usr1", d.Name, corev1.RestartPolicyAlways, nil)
	// The API server validates a stop signal against the pod's OS.
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGUSR1)}
	daemontest.CreateGated(t, c, ns, "lifecycle.stopSignal", func(p *corev1.Pod) bool {
		l := p.Spec.Containers[0].Lifecycle
		return l != nil && l.StopSignal != nil
	}, pod)
	daemontest.WaitPod(t, c.Client, ns, "usr1", "Running with stopSignal SIGUSR1 reported", func(p *corev1.Pod) bool {
		cs := daemontest.MainContainer(p)
		return daemontest.Running(p) && cs.StopSignal != nil && *cs.StopSignal == corev1.SIGUSR1
	})
}
