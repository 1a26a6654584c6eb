//go:build e2e

package replicas_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
)

// mutatingCalls are the provider methods that change what the backend runs
// and that a pod's creation or deletion leads to.
var mutatingCalls = []string{"CreatePod", "UpdatePod", "DeletePod", "SetPodVolumes"}

// backendCalls counts r's calls of the mutating methods by method and
// result ("fenced": refused by its fence, never sent).
func backendCalls(t *testing.T, r *replica) map[string]int {
	t.Helper()
	out := map[string]int{}
	for _, m := range mutatingCalls {
		for _, result := range []string{"success", "error", "not_found", "fenced"} {
			n, err := daemontest.Metric(r.metrics, fmt.Sprintf(`virtual_kubelet_provider_call_duration_seconds_count{method=%q,result=%q}`, m, result))
			if err != nil {
				t.Fatal(err)
			}
			out[m+" "+result] = int(n)
		}
	}
	return out
}

// TestPausedReplicaSendsNothing pauses a replica (SIGSTOP) past its node
// leases, and while it is paused deletes the pods it created on its nodes
// and creates new ones there, which the other replica, holding the nodes
// by then, runs and then deletes too. When the paused replica resumes, its
// watch delivers all of it at once: from where it stands, deletes and
// creates are due on nodes it no longer holds. It must send none of them to
// the backend (what it tries is counted as fenced). Once it holds its
// nodes again there is no pod left on them, so any call counted is one that
// crossed the fence.
func TestPausedReplicaSendsNothing(t *testing.T) {
	g := newHAGroup(t, 2, 4)
	ctx := context.Background()
	pods := g.c.Client.CoreV1().Pods(g.ns)
	var p *replica
	for _, r := range g.replicas {
		if p == nil || len(g.held(r)) > len(g.held(p)) {
			p = r
		}
	}
	moved := g.held(p)
	if len(moved) == 0 {
		t.Fatalf("replica %s holds no node", p.identity)
	}
	createOn := func(prefix string) {
		t.Helper()
		for i, n := range moved {
			if _, err := pods.Create(ctx, daemontest.MockPod(fmt.Sprintf("%s%d", prefix, i), n, corev1.RestartPolicyAlways, nil), metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
	}
	deleteAll := func() {
		t.Helper()
		if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
			t.Fatal(err)
		}
		daemontest.Eventually(t, "every pod gone", func() (bool, string) {
			list, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			return len(list.Items) == 0, fmt.Sprintf("%d pods left", len(list.Items))
		})
	}
	createOn("old")
	allRunning(t, g.c, g.ns, len(moved))
	// A pod shows Running as soon as the provider reports it, before its
	// CreatePod call has returned and been counted.
	var before map[string]int
	daemontest.Eventually(t, "the replica's CreatePod calls counted", func() (bool, string) {
		before = backendCalls(t, p)
		return before["CreatePod success"] == len(moved), fmt.Sprintf("%d CreatePod calls counted", before["CreatePod success"])
	})

	resume := p.pause(t)
	if err := pods.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	createOn("new")
	// The old pods go and the new ones run only once the paused replica's
	// leases expired and the other one took the nodes.
	daemontest.Eventually(t, "the paused replica's nodes held by the other one", g.balanced(p))
	allRunning(t, g.c, g.ns, len(moved))
	deleteAll()

	resume()
	resumedAt := time.Now()
	daemontest.Eventually(t, "the resumed replica rejoins and gets its nodes back", g.balanced())
	t.Logf("the resumed replica holds its %d nodes again after %s", len(moved), time.Since(resumedAt).Round(100*time.Millisecond))
	for call, n := range backendCalls(t, p) {
		if n -= before[call]; n == 0 {
			continue
		}
		if strings.HasSuffix(call, " fenced") {
			t.Logf("resumed replica: %d %s calls refused by its fence", n, strings.TrimSuffix(call, " fenced"))
		} else {
			t.Errorf("resumed replica: %d %s calls sent to the backend, want 0", n, call)
		}
	}
	g.checkEnd(t)
}
