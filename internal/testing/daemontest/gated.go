package daemontest

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// ReadyMockNode starts a mock node on loopback against the shared
// cluster and waits until it is Ready; it returns the cluster, a
// namespace for the test's pods and the daemon.
func ReadyMockNode(t *testing.T) (*testcluster.Cluster, string, *Daemon) {
	t.Helper()
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	d := Start(t, c, nil)
	WaitNodeReady(t, c.Client, d.Name)
	return c, ns, d
}

// CreateGated creates the pods in ns, then checks that the API server
// kept the feature-gated field of the first, kept telling whether it
// did: an API server without the gate drops the field silently, and
// what the test then saw would prove nothing. field names it.
func CreateGated(t *testing.T, c *testcluster.Cluster, ns, field string, kept func(*corev1.Pod) bool, pods ...*corev1.Pod) {
	t.Helper()
	CreatePods(t, c.Client, ns, pods...)
	created, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), pods[0].Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !kept(created) {
		t.Fatalf("the API server dropped %s: the control plane runs without --feature-gates=%s", field, controlplane.FeatureGates)
	}
}
