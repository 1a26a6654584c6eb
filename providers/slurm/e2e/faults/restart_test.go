//go:build e2e

package faults_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
)

// TestDaemonKilledAdoptsJobs: the daemon is SIGKILLed with pods running and
// started again; it adopts their jobs (the pods stay Running and can be
// deleted) and submits none of them twice.
func TestDaemonKilledAdoptsJobs(t *testing.T) {
	n, d, ns := slurmtest.RunningNode(t)
	c, ctx := n.C, context.Background()

	const pods = 5
	var uids []types.UID
	for i := range pods {
		p := n.Create(t, n.Pod(ns, fmt.Sprintf("p%d", i), slurmtest.Shell("main", "echo up; while :; do sleep 0.5; done")))
		uids = append(uids, p.UID)
	}
	for i := range pods {
		n.WaitPod(t, ns, fmt.Sprintf("p%d", i), "Running", daemontest.Running)
	}
	d.Kill()
	n.Start(t)

	// A pod created after the restart runs too.
	n.Create(t, n.Pod(ns, "after", slurmtest.Shell("main", "while :; do sleep 0.5; done")))
	n.WaitPod(t, ns, "after", "Running", daemontest.Running)
	for i := range pods {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("p%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range pods {
		n.WaitGone(t, ns, fmt.Sprintf("p%d", i))
	}
	jobs := map[string]int{}
	for _, comment := range n.JobComments(t) {
		jobs[comment]++
	}
	for _, uid := range uids {
		if got := jobs["vk-pod:"+string(uid)]; got != 1 {
			t.Errorf("pod %s: %d jobs submitted, want 1 (all: %v)", uid, got, jobs)
		}
	}
	if p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "after", metav1.GetOptions{}); err != nil || p.Status.Phase != corev1.PodRunning {
		t.Errorf("pod after: %v %v", err, p.Status.Phase)
	}
}
