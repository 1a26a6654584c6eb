//go:build e2e

package e2e_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// TestDaemonKilledAdoptsJobs: the daemon is SIGKILLed with pods running and
// started again; it adopts their jobs (the pods stay Running and can be
// deleted) and submits none of them twice.
func TestDaemonKilledAdoptsJobs(t *testing.T) {
	n, d, ns := runningNode(t)
	c, ctx := n.c, context.Background()

	const pods = 5
	var uids []types.UID
	for i := range pods {
		p := n.create(t, n.pod(ns, fmt.Sprintf("p%d", i), shell("main", "echo up; while :; do sleep 0.5; done")))
		uids = append(uids, p.UID)
	}
	for i := range pods {
		n.waitPod(t, ns, fmt.Sprintf("p%d", i), "Running", running)
	}
	d.Kill()
	n.start(t)

	// A pod created after the restart runs too.
	n.create(t, n.pod(ns, "after", shell("main", "while :; do sleep 0.5; done")))
	n.waitPod(t, ns, "after", "Running", running)
	for i := range pods {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("p%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range pods {
		waitGone(t, c, ns, fmt.Sprintf("p%d", i))
	}
	jobs := map[string]int{}
	for _, comment := range n.jobComments(t) {
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
