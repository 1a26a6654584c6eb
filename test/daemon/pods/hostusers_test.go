//go:build e2e

package pods_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node"
)

// TestHostUsers: the Node says in status.runtimeHandlers[].features
// whether its provider gives pods user namespaces. A pod with hostUsers:
// false runs on the mock, which simulates them; on a mock configured
// without them it is refused as a kubelet whose runtime cannot refuses it:
// Pending, its container waiting, with a FailedCreatePodSandBox Event
// naming the reason. A pod with a ResourceClaim on a node without devices
// is refused likewise (FailedPrepareDynamicResources), as on every
// provider without devices, the kubernetes provider's included.
func TestHostUsers(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	able := daemontest.Start(t, c, nil)
	unable := testcluster.UniqueName("vk")
	cfg := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(cfg, fmt.Appendf(nil, `{%q: {"runtimeFeatures": {"userNamespaces": false}}}`, unable), 0o600); err != nil {
		t.Fatal(err)
	}
	daemontest.Start(t, c, nil, "--nodename", unable, "--provider-config", cfg)
	for name, want := range map[string]bool{able.Name: true, unable: false} {
		daemontest.WaitNodeReady(t, c.Client, name)
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got, ok := daemontest.UserNamespaces(n); !ok || got != want {
			t.Errorf("node %s: runtimeHandlers %+v, want userNamespaces %v", name, n.Status.RuntimeHandlers, want)
		}
	}

	userns := func(name, nodeName string) *corev1.Pod {
		pod := daemontest.MockPod(name, nodeName, corev1.RestartPolicyAlways, nil)
		pod.Spec.HostUsers = ptr.To(false)
		return pod
	}
	claiming := daemontest.MockPod("claims", able.Name, corev1.RestartPolicyAlways, nil)
	claiming.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("some-gpu")}}
	daemontest.CreatePods(t, c.Client, ns, userns("userns", able.Name), userns("refused", unable), claiming)

	daemontest.WaitPod(t, c.Client, ns, "userns", "Running in a user namespace", daemontest.Running)
	for _, tc := range []struct{ pod, reason, says string }{
		{"refused", node.ReasonFailedCreatePodSandBox, "does not support user namespaces"},
		{"claims", node.ReasonFailedPrepareDevices, "ResourceClaim some-gpu"},
	} {
		pod := daemontest.WaitRefused(t, c.Client, ns, tc.pod, tc.reason, tc.says)
		if w := daemontest.MainContainer(pod).State.Waiting; w.Reason != "ContainerCreating" {
			t.Errorf("%s: waiting reason %q, want the kubelet's ContainerCreating", tc.pod, w.Reason)
		}
	}
}
