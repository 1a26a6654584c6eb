//go:build e2e

package kubernetes_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/node"
)

// TestKubernetesProviderRefusesClaimsAndUserNamespaces: the kubernetes
// provider publishes no devices and declares no user namespaces, so a pod
// bound to its node that needs a ResourceClaim, or asks hostUsers: false,
// stays Pending in A with the kubelet's Event naming the reason, and
// nothing is created for it in B; the Node says userNamespaces false.
func TestKubernetesProviderRefusesClaimsAndUserNamespaces(t *testing.T) {
	tc := startTwoClusters(t)
	ctx := context.Background()
	n, err := tc.a.Client.CoreV1().Nodes().Get(ctx, tc.node.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := daemontest.UserNamespaces(n); !ok || got {
		t.Errorf("runtimeHandlers %+v, want userNamespaces false", n.Status.RuntimeHandlers)
	}

	claims := tc.pod("claims", corev1.Container{Name: "main", Image: "busybox",
		Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}})
	claims.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("some-gpu")}}
	userns := tc.pod("userns", corev1.Container{Name: "main", Image: "busybox"})
	userns.Spec.HostUsers = ptr.To(false)
	tc.create(t, claims)
	tc.create(t, userns)
	for _, want := range []struct{ pod, reason, says string }{
		{"claims", node.ReasonFailedPrepareDevices, "ResourceClaim some-gpu"},
		{"userns", node.ReasonFailedCreatePodSandBox, "does not support user namespaces"},
	} {
		daemontest.WaitRefused(t, tc.a.Client, tc.ns, want.pod, want.reason, want.says)
	}
	if remote := tc.remotePods(t); len(remote) != 0 {
		t.Errorf("pods created in B for refused pods: %v", remote)
	}
}
