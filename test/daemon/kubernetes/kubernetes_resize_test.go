//go:build e2e

package kubernetes_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestKubernetesProviderResize: `kubectl patch --subresource resize` of a
// pod on the kubernetes provider's node resizes its pod in B through B's
// own resize subresource, and A shows B's outcome: the new limits in both
// pods' containerStatuses[].resources, with PodResizeInProgress in A while
// B's mock node applies them (scripted to take 2s); B's node refusing it
// (the mock scripted to) or B's API server refusing it (a ResourceQuota of
// B's namespace) is PodResizePending/Infeasible in A with B's reason.
func TestKubernetesProviderResize(t *testing.T) {
	tc := startTwoClusters(t)
	ctx := context.Background()
	quota := &corev1.ResourceQuota{
		ObjectMeta: metav1.ObjectMeta{Name: "cpu"},
		Spec:       corev1.ResourceQuotaSpec{Hard: corev1.ResourceList{corev1.ResourceLimitsCPU: resource.MustParse("1")}},
	}
	if _, err := tc.b.Client.CoreV1().ResourceQuotas(tc.remoteNS).Create(ctx, quota, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.CreatePods(t, tc.a.Client, tc.ns,
		daemontest.ResizePod("slow", tc.node.Name, map[string]string{mock.AnnotationResizeDelay: "2s"}),
		daemontest.ResizePod("refused", tc.node.Name, map[string]string{mock.AnnotationResize: "refuse"}),
		daemontest.ResizePod("over-quota", tc.node.Name, nil),
	)
	for _, name := range []string{"slow", "refused", "over-quota"} {
		daemontest.WaitPod(t, tc.a.Client, tc.ns, name, "Running with its resources reported", func(p *corev1.Pod) bool {
			return daemontest.Running(p) && daemontest.RunsWith(p, "100m", "200m") && p.Status.ObservedGeneration == p.Generation
		})
	}
	// remote is B's pod of A's pod name.
	remote := func(t *testing.T, name string) *corev1.Pod {
		t.Helper()
		pods := tc.remotePods(t)[name]
		if len(pods) != 1 {
			t.Fatalf("%d pods of %s in B", len(pods), name)
		}
		return &pods[0]
	}

	t.Run("applied in B", func(t *testing.T) {
		daemontest.ResizeThroughProgress(t, tc.a, tc.ns, "slow")
		pod := daemontest.WaitPod(t, tc.a.Client, tc.ns, "slow", "running with the new resources", func(p *corev1.Pod) bool {
			return daemontest.RunsWith(p, "150m", "300m") && p.Status.ObservedGeneration == p.Generation
		})
		if daemontest.ResizeCondition(pod, corev1.PodResizePending) != nil || pod.Status.ContainerStatuses[0].RestartCount != 0 {
			t.Errorf("after the resize: %s", daemontest.DescribeResize(pod))
		}
		if r := remote(t, "slow"); !daemontest.RunsWith(r, "150m", "300m") || r.Generation < 2 {
			t.Errorf("B's pod: %s", daemontest.DescribeResize(r))
		}
	})

	// infeasible waits for A's pod name to show PodResizePending/Infeasible
	// for its resize, with a message saying want, and checks that neither A
	// nor B report other resources than before.
	infeasible := func(t *testing.T, name, want string) {
		t.Helper()
		pod := daemontest.WaitPod(t, tc.a.Client, tc.ns, name, "PodResizePending/Infeasible", func(p *corev1.Pod) bool {
			cond := daemontest.ResizeCondition(p, corev1.PodResizePending)
			return cond != nil && cond.Reason == corev1.PodReasonInfeasible && cond.ObservedGeneration == p.Generation
		})
		if cond := daemontest.ResizeCondition(pod, corev1.PodResizePending); !strings.Contains(cond.Message, want) {
			t.Errorf("Infeasible message %q does not say %q", cond.Message, want)
		}
		if r := remote(t, name); !daemontest.RunsWith(pod, "100m", "200m") || !daemontest.RunsWith(r, "100m", "200m") {
			t.Errorf("an infeasible resize changed the reported resources: A %s; B %s", daemontest.DescribeResize(pod), daemontest.DescribeResize(r))
		}
	}

	t.Run("infeasible in B", func(t *testing.T) {
		daemontest.Kubectl(t, tc.a, "-n", tc.ns, "patch", "pod", "refused", "--subresource", "resize", "-p", daemontest.CPUResize)
		infeasible(t, "refused", "the mock refuses the resize")
		if cond := daemontest.ResizeCondition(remote(t, "refused"), corev1.PodResizePending); cond == nil || cond.Reason != corev1.PodReasonInfeasible {
			t.Errorf("B's pod is not PodResizePending/Infeasible: %+v", cond)
		}
	})

	t.Run("refused by B's API server", func(t *testing.T) {
		daemontest.Kubectl(t, tc.a, "-n", tc.ns, "patch", "pod", "over-quota", "--subresource", "resize", "-p",
			`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"},"limits":{"cpu":"2"}}}]}}`)
		infeasible(t, "over-quota", "exceeded quota")
	})
}
