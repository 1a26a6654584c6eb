//go:build e2e

package kubernetes_test

import (
	"context"
	"fmt"
	"strings"
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
	if h := n.Status.RuntimeHandlers; len(h) != 1 || h[0].Features == nil || h[0].Features.UserNamespaces == nil || *h[0].Features.UserNamespaces {
		t.Errorf("runtimeHandlers %+v, want userNamespaces false", h)
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
		daemontest.WaitPod(t, tc.a.Client, tc.ns, want.pod, "Pending with the reason", func(p *corev1.Pod) bool {
			w := daemontest.MainContainer(p).State.Waiting
			return p.Status.Phase == corev1.PodPending && w != nil && strings.Contains(w.Message, want.says)
		})
		daemontest.Eventually(t, want.pod+"'s "+want.reason+" Event", func() (bool, string) {
			evs, err := tc.a.Client.CoreV1().Events(tc.ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + want.pod + ",reason=" + want.reason})
			if err != nil {
				return false, err.Error()
			}
			return len(evs.Items) > 0 && strings.Contains(evs.Items[0].Message, want.says), fmt.Sprintf("%d events", len(evs.Items))
		})
	}
	if remote := tc.remotePods(t); len(remote) != 0 {
		t.Errorf("pods created in B for refused pods: %v", remote)
	}
}
