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
)

// TestStopSignalReported checks that a container with lifecycle.stopSignal SIGUSR1
// on the mock shows it in containerStatuses[].stopSignal, the signal its
// stop sends, as a kubelet reports the runtime's effective one.
func TestStopSignalReported(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	d := daemontest.Start(t, c, nil)
	daemontest.WaitNodeReady(t, c.Client, d.Name)

	pod := daemontest.MockPod("usr1", d.Name, corev1.RestartPolicyAlways, nil)
	// The API server validates a stop signal against the pod's OS.
	pod.Spec.OS = &corev1.PodOS{Name: corev1.Linux}
	pod.Spec.Containers[0].Lifecycle = &corev1.Lifecycle{StopSignal: ptr.To(corev1.SIGUSR1)}
	daemontest.CreatePods(t, c.Client, ns, pod)
	created, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "usr1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if l := created.Spec.Containers[0].Lifecycle; l == nil || l.StopSignal == nil {
		t.Fatalf("the API server dropped lifecycle.stopSignal: the control plane runs without --feature-gates=%s", controlplane.FeatureGates)
	}
	daemontest.WaitPod(t, c.Client, ns, "usr1", "Running with stopSignal SIGUSR1 reported", func(p *corev1.Pod) bool {
		cs := daemontest.MainContainer(p)
		return daemontest.Running(p) && cs.StopSignal != nil && *cs.StopSignal == corev1.SIGUSR1
	})
}
