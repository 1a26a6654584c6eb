//go:build e2e

package plugins_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// labellingPlugin is the mock with node labels of its choosing.
type labellingPlugin struct {
	node.Provider
	labels map[string]string
}

// NodeLabels implements node.NodeDecorator.
func (p labellingPlugin) NodeLabels() map[string]string { return p.labels }

// NodeTaints implements node.NodeDecorator.
func (p labellingPlugin) NodeTaints() []corev1.Taint { return nil }

// TestPluginCannotClaimLabels: a plugin labels its node as the control
// plane and with another node's hostname, beside labels a kubelet may
// set. The Node in the API server has only the allowed ones, and the
// daemon names each refused label in its log, once.
func TestPluginCannotClaimLabels(t *testing.T) {
	c := testcluster.Shared(t)
	name := testcluster.UniqueName("vk")
	mockProvider, err := mock.New(context.Background(), provider.InitConfig{NodeName: name, OperatingSystem: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	hostile := labellingPlugin{Provider: mockProvider, labels: map[string]string{
		"node-role.kubernetes.io/control-plane": "",
		corev1.LabelHostname:                    "other",
		corev1.LabelTopologyZone:                "z1",
		"example.com/x":                         "y",
	}}

	cfg := serveInProcess(t, hostile)

	d := daemontest.Start(t, c, nil, "--nodename", name, "--provider", "grpc", "--provider-config", cfg)
	n := daemontest.WaitNodeReady(t, c.Client, d.Name)
	if _, ok := n.Labels["node-role.kubernetes.io/control-plane"]; ok || n.Labels[corev1.LabelHostname] != name {
		t.Errorf("the plugin claimed labels: %v", n.Labels)
	}
	if n.Labels[corev1.LabelTopologyZone] != "z1" || n.Labels["example.com/x"] != "y" {
		t.Errorf("the allowed labels did not arrive: %v", n.Labels)
	}
	out := d.Output.String()
	for _, label := range []string{"node-role.kubernetes.io/control-plane", corev1.LabelHostname} {
		if got := strings.Count(out, "node label "+label+" "); got != 1 {
			t.Errorf("the daemon named %s %d times, want once", label, got)
		}
	}
	if strings.Contains(out, "node label example.com/x") {
		t.Error("an allowed label was named as refused")
	}
}
