//go:build e2e

package node_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// TestTerminalStatusSurvivesAPIServerOutage stops the apiserver while the
// provider reports two terminal statuses, one of them for a pod being
// deleted, and starts it again: both statuses must reach the apiserver, and
// the deleted pod must be removed only after its status is there. (The
// upstream project loses such statuses: its issue #712.)
func TestTerminalStatusSurvivesAPIServerOutage(t *testing.T) {
	c := testcluster.Private(t)
	cp := c.ControlPlane(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := newTestProvider()
	p.holdTerminal = true
	_, nodeName := startNode(t, c, notifyingProvider{p}, nil)

	finishing := newPod(ns, nodeName, "finishing")
	deleting := newPod(ns, nodeName, "deleting")
	deleting.Finalizers = []string{"test.vkubelet.io/hold"}
	for _, pod := range []*corev1.Pod{finishing, deleting} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	finishing = waitPod(t, c.Client, ns, "finishing", "Running", phaseIs(corev1.PodRunning))
	deleting = waitPod(t, c.Client, ns, "deleting", "Running", phaseIs(corev1.PodRunning))

	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "deleting", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "provider told to delete", func() (bool, string) { return p.count("DeletePod") > 0, "" })

	if err := cp.StopComponent(controlplane.APIServer); err != nil {
		t.Fatal(err)
	}
	p.finish(finishing, 0)
	p.finish(deleting, 7)
	// Long enough for several failed writes and their backoff.
	time.Sleep(3 * time.Second)
	if err := cp.StartComponent(ctx, controlplane.APIServer); err != nil {
		t.Fatal(err)
	}

	done := waitPod(t, c.Client, ns, "finishing", "Succeeded after the outage", phaseIs(corev1.PodSucceeded))
	if done.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("container status not terminal: %+v", done.Status.ContainerStatuses[0].State)
	}
	final := waitPod(t, c.Client, ns, "deleting", "deleted after its status was written", func(p *corev1.Pod) bool {
		return p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0
	})
	term := final.Status.ContainerStatuses[0].State.Terminated
	if final.Status.Phase != corev1.PodFailed || term == nil || term.ExitCode != 7 {
		t.Errorf("deleted pod's terminal status lost: phase=%s state=%+v", final.Status.Phase, final.Status.ContainerStatuses[0].State)
	}
	removeFinalizers(t, c.Client, ns, "deleting")
	waitGone(t, c.Client, ns, "deleting")
}
