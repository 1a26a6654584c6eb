//go:build e2e

package faults_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
)

// outagePodsVar sizes the outage test: how many pods, half submitted
// before slurmctld stops, half while it is down. The default is small for
// a shared 2-core machine; the figure is 50.
const outagePodsVar = "VK_SLURM_OUTAGE_PODS"

// outageSize is VK_SLURM_OUTAGE_PODS, 20 when unset.
func outageSize(t *testing.T) int {
	v := os.Getenv(outagePodsVar)
	if v == "" {
		return 20
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 2 {
		t.Fatalf("%s=%q: want a pod count of at least 2", outagePodsVar, v)
	}
	return n
}

// TestSlurmctldOutage: slurmctld stops for at least 60 s, until the node
// has gone NotReady; pods created meanwhile wait; when it is back the node
// is Ready again, every pod ends Succeeded and none was submitted twice.
func TestSlurmctldOutage(t *testing.T) {
	outagePods := outageSize(t)
	n, _, ns := slurmtest.RunningNode(t)
	c, ctx := n.C, context.Background()

	var uids []types.UID
	create := func(i int) {
		p := n.Create(t, n.Pod(ns, fmt.Sprintf("p%d", i), slurmtest.Shell("main", "sleep 20")))
		uids = append(uids, p.UID)
	}
	for i := range outagePods / 2 {
		create(i)
	}
	// Started before the outage; on a loaded machine a 20 s job may have
	// ended by the time the test looks.
	for i := range outagePods / 2 {
		n.WaitPod(t, ns, fmt.Sprintf("p%d", i), "started", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodRunning || p.Status.Phase == corev1.PodSucceeded
		})
	}

	pidData, err := os.ReadFile(filepath.Join(n.Dir, "slurmctld.pid"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(pidData)))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Kill(pid, syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	for i := outagePods / 2; i < outagePods; i++ {
		create(i)
	}
	slurmtest.Eventually(t, "node NotReady while slurmctld is down", func() (bool, string) {
		node, err := c.Client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range node.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status != corev1.ConditionTrue, string(cond.Status)
			}
		}
		return false, "no Ready condition"
	})
	if wait := 60*time.Second - time.Since(stopped); wait > 0 {
		// The outage's length is the scenario, not a synchronisation.
		time.Sleep(wait)
	}
	if out, err := n.Script(ctx, "start", n.Dir).CombinedOutput(); err != nil {
		t.Fatalf("starting slurmctld again: %v\n%s", err, out)
	}
	n.WaitReady(t)
	for i := range outagePods {
		n.WaitPod(t, ns, fmt.Sprintf("p%d", i), "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	}
	jobs := map[string]int{}
	for _, comment := range n.JobComments(t) {
		jobs[comment]++
	}
	for _, uid := range uids {
		if got := jobs["vk-pod:"+string(uid)]; got != 1 {
			t.Errorf("pod %s: %d jobs, want 1", uid, got)
		}
	}
}
