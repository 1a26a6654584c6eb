//go:build e2e

package faults_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// These tests crash what a virtual node depends on (the daemon itself, the
// API server) in the middle of pods' lives and check that no terminal
// status is lost, no pod stays Terminating and nothing panics.

// mockConfig writes a provider config file with entry for node and returns
// its path.
func mockConfig(t *testing.T, node, entry string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`{%q: %s}`, node, entry)), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// outcome is something that must come true after a fault.
type outcome struct {
	what string
	cond func() (bool, string)
}

// settle polls every outcome until all are true or the timeout has passed
// since start, and logs when each came true. One that does not fails the
// test without keeping the others from being checked.
func settle(t *testing.T, start time.Time, outcomes []outcome) {
	t.Helper()
	at := make([]time.Duration, len(outcomes))
	last := make([]string, len(outcomes))
	for pending := len(outcomes); pending > 0 && time.Since(start) < daemontest.Timeout; time.Sleep(100 * time.Millisecond) {
		for i, o := range outcomes {
			if at[i] != 0 {
				continue
			}
			ok, msg := o.cond()
			if last[i] = msg; ok {
				at[i] = time.Since(start)
				pending--
			}
		}
	}
	for i, o := range outcomes {
		if at[i] == 0 {
			t.Errorf("%s: not within %s (last: %s)", o.what, daemontest.Timeout, last[i])
		} else {
			t.Logf("%s: after %s", o.what, at[i].Round(time.Millisecond))
		}
	}
}

// TestDaemonKilledAndRestarted kills the daemon with SIGKILL while its pods
// are Running, Pending and Terminating, changes things while it is down,
// and starts it again on the same node with the mock's state directory (the
// backend kept running): running pods are adopted, never created again;
// pending ones start; terminating ones finish; the pod the backend lost
// ends Failed (restartPolicy Never); the pod deleted meanwhile is removed
// from the backend.
func TestDaemonKilledAndRestarted(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	name := testcluster.UniqueName("vk")
	state := filepath.Join(t.TempDir(), "state")
	cfg := mockConfig(t, name, fmt.Sprintf(`{"stateDir": %q}`, state))
	metrics := fmt.Sprintf("127.0.0.1:%d", freeport.Get(t))
	args := []string{"--nodename", name, "--provider-config", cfg, "--metrics-addr", metrics}
	first := daemontest.Start(t, c, nil, args...)
	daemontest.WaitNodeReady(t, c.Client, name)

	always, never := corev1.RestartPolicyAlways, corev1.RestartPolicyNever
	adopted := []string{"run-0", "run-1", "run-2"}
	for _, n := range adopted {
		daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod(n, name, always, nil))
	}
	daemontest.CreatePods(t, c.Client, ns,
		// Starts after the restart.
		daemontest.MockPod("pending", name, always, map[string]string{mock.AnnotationStartDelay: "14s"}),
		// The daemon dies while DeletePod hangs.
		daemontest.MockPod("deleting", name, always, map[string]string{mock.AnnotationHangCalls: "DeletePod", mock.AnnotationHangFor: "4s"}),
		// The backend never confirms its stop: the grace period must end it.
		daemontest.MockPod("unstoppable", name, always, map[string]string{mock.AnnotationIgnoreStop: "true"}),
		// Lost by the backend while the daemon is down; restartPolicy Never
		// (Always would have it created again).
		daemontest.MockPod("lost", name, never, nil),
		// Deleted from Kubernetes while the daemon is down.
		daemontest.MockPod("orphan", name, always, nil),
	)
	before := map[string]*corev1.Pod{}
	for _, n := range append(adopted, "deleting", "unstoppable", "lost", "orphan") {
		before[n] = daemontest.WaitPod(t, c.Client, ns, n, "Running", daemontest.Running)
	}
	before["pending"] = daemontest.WaitPod(t, c.Client, ns, "pending", "Pending, creating", func(p *corev1.Pod) bool {
		w := daemontest.MainContainer(p).State.Waiting
		return p.Status.Phase == corev1.PodPending && w != nil && w.Reason == "ContainerCreating"
	})
	if daemontest.ProviderCalls(t, metrics, "CreatePod") != 8 {
		t.Fatalf("CreatePod calls before the crash: %d, want one per pod", daemontest.ProviderCalls(t, metrics, "CreatePod"))
	}

	for n, grace := range map[string]int64{"deleting": 60, "unstoppable": 6} {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, n, metav1.DeleteOptions{GracePeriodSeconds: ptr.To(grace)}); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(time.Second) // DeletePod is hanging for "deleting" and was ignored for "unstoppable"
	// Its container exits while the daemon is down.
	daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod("finishes", name, never, map[string]string{mock.AnnotationRunFor: "2s"}))
	before["finishes"] = daemontest.WaitPod(t, c.Client, ns, "finishes", "Running", daemontest.Running)

	first.Kill()
	killed := time.Now()
	daemontest.CheckNoPanic(t, first)
	// While the daemon is down: the backend loses a pod, a pod is force
	// deleted and a new one is scheduled.
	if err := os.Remove(filepath.Join(state, ns+"_lost.json")); err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "orphan", daemontest.DeleteNow); err != nil {
		t.Fatal(err)
	}
	daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod("newcomer", name, always, nil))
	time.Sleep(4 * time.Second)

	restarted := time.Now()
	second := daemontest.Start(t, c, nil, args...)
	podIs := func(n string, cond func(*corev1.Pod) bool) func() (bool, string) {
		return daemontest.PodMatches(c.Client, ns, n, cond)
	}
	outcomes := []outcome{
		{what: "the restarted daemon renews the node's lease", cond: func() (bool, string) {
			l, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return l.Spec.RenewTime != nil && l.Spec.RenewTime.After(restarted), fmt.Sprint(l.Spec.RenewTime)
		}},
		{what: "the sync queue drained: every pod on the node synced once", cond: func() (bool, string) {
			var synced, depth, busy float64
			var err error
			for _, m := range []struct {
				v    *float64
				name string
			}{{&synced, "workqueue_adds_total"}, {&depth, "workqueue_depth"}, {&busy, "workqueue_unfinished_work_seconds"}} {
				if *m.v, err = daemontest.Metric(metrics, m.name+`{name="syncPodsFromKubernetes"}`); err != nil {
					return false, err.Error()
				}
			}
			return synced >= float64(len(before)) && depth == 0 && busy == 0, fmt.Sprintf("adds=%v depth=%v unfinished=%vs", synced, depth, busy)
		}},
		{what: "the pod the backend lost ends Failed, reason ProviderLost", cond: podIs("lost", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodFailed && p.Status.Reason == "ProviderLost" && daemontest.MainContainer(p).State.Terminated != nil
		})},
		{what: "the pod scheduled while the daemon was down runs", cond: daemontest.PodRunning(c.Client, ns, "newcomer")},
		{what: "the pod that finished while the daemon was down is Succeeded, after its 2s run", cond: podIs("finishes", func(p *corev1.Pod) bool {
			term := daemontest.MainContainer(p).State.Terminated
			if p.Status.Phase != corev1.PodSucceeded || term == nil || term.ExitCode != 0 {
				return false
			}
			// The backend's times, not the restart's; seconds in the API may
			// add one.
			ran := term.FinishedAt.Sub(term.StartedAt.Time)
			return ran == 2*time.Second || ran == 3*time.Second
		})},
		{what: "the pending pod runs, started 14s after it was created", cond: podIs("pending", func(p *corev1.Pod) bool {
			run := daemontest.MainContainer(p).State.Running
			if !daemontest.Running(p) || run == nil || p.Status.StartTime == nil {
				return false
			}
			// Seconds in the API, and a timer's lateness, may add one.
			delay := run.StartedAt.Sub(p.Status.StartTime.Time)
			return delay == 14*time.Second || delay == 15*time.Second
		})},
		{what: "the pod whose DeletePod hung across the crash is gone", cond: daemontest.PodGone(c.Client, ns, "deleting", before["deleting"].UID)},
		{what: "the pod the backend never stops is gone after its grace period", cond: daemontest.PodGone(c.Client, ns, "unstoppable", before["unstoppable"].UID)},
		{what: "the pod deleted while the daemon was down is removed from the backend", cond: func() (bool, string) {
			_, err := os.Stat(filepath.Join(state, ns+"_orphan.json"))
			return os.IsNotExist(err), fmt.Sprint(err)
		}},
	}
	settle(t, restarted, outcomes)
	t.Logf("daemon down %s", restarted.Sub(killed).Round(time.Millisecond))

	for _, n := range adopted {
		now, err := c.Client.CoreV1().Pods(ns).Get(ctx, n, metav1.GetOptions{})
		if err != nil {
			t.Errorf("%s: %v", n, err)
			continue
		}
		was, is := daemontest.MainContainer(before[n]), daemontest.MainContainer(now)
		if now.Status.Phase != corev1.PodRunning || is.State.Running == nil || was.State.Running == nil ||
			!is.State.Running.StartedAt.Equal(&was.State.Running.StartedAt) || is.RestartCount != was.RestartCount ||
			!now.Status.StartTime.Equal(before[n].Status.StartTime) || now.Status.PodIP != before[n].Status.PodIP {
			t.Errorf("%s was not adopted as it ran: now %s %+v restarts %d start %v ip %s; before %+v restarts %d start %v ip %s",
				n, now.Status.Phase, is.State, is.RestartCount, now.Status.StartTime, now.Status.PodIP,
				was.State, was.RestartCount, before[n].Status.StartTime, before[n].Status.PodIP)
		}
	}
	// Only the pod scheduled while the daemon was down was created.
	creates := daemontest.ProviderCalls(t, metrics, "CreatePod")
	t.Logf("CreatePod calls after the restart: %d", creates)
	if creates != 1 {
		t.Errorf("CreatePod calls after the restart: %d, want 1 (the newcomer)", creates)
	}
	daemontest.CheckNoPanic(t, second)
}

// TestAPIServerKilledWhilePodsFinishAndDelete kills the API server with
// SIGKILL while pods finish and pods are being deleted, and starts it again:
// every terminal status reaches it, and every deleted pod is removed, after
// its terminal status was written.
func TestAPIServerKilledWhilePodsFinishAndDelete(t *testing.T) {
	c := testcluster.Private(t)
	cp := c.ControlPlane(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	// 64 workers: the 16 pods' DeletePod all hang, within the node's bound.
	d := daemontest.Start(t, c, nil, "--pod-sync-workers", "64")
	daemontest.WaitNodeReady(t, c.Client, d.Name)

	const n = 8
	hold := "test.vkubelet.io/hold"
	var finishing, deleting, held []string
	for i := range n {
		f, del, h := fmt.Sprintf("finishing-%d", i), fmt.Sprintf("deleting-%d", i), fmt.Sprintf("held-%d", i)
		finishing, deleting, held = append(finishing, f), append(deleting, del), append(held, h)
		// Exit codes tell each pod's status apart.
		daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod(f, d.Name, corev1.RestartPolicyNever, map[string]string{
			mock.AnnotationRunFor: "4s", mock.AnnotationExitCode: strconv.Itoa(i % 2),
		}))
		// DeletePod finishes while the API server is away.
		slowStop := map[string]string{mock.AnnotationHangCalls: "DeletePod", mock.AnnotationHangFor: "2s"}
		daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod(del, d.Name, corev1.RestartPolicyAlways, slowStop))
		// A finalizer keeps the object, so its final status can be read.
		heldPod := daemontest.MockPod(h, d.Name, corev1.RestartPolicyAlways, slowStop)
		heldPod.Finalizers = []string{hold}
		daemontest.CreatePods(t, c.Client, ns, heldPod)
	}
	// The backend never confirms their stop, and their grace period ends
	// while the API server is away.
	unstoppable := []string{"unstoppable-0", "unstoppable-1"}
	for _, p := range unstoppable {
		daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod(p, d.Name, corev1.RestartPolicyAlways, map[string]string{mock.AnnotationIgnoreStop: "true"}))
	}
	uids := map[string]types.UID{}
	for _, p := range slices.Concat(finishing, deleting, held, unstoppable) {
		uids[p] = daemontest.WaitPod(t, c.Client, ns, p, "Running", daemontest.Running).UID
	}
	for _, p := range slices.Concat(deleting, held) {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range unstoppable {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](2)}); err != nil {
			t.Fatal(err)
		}
	}

	if err := cp.KillComponent(controlplane.APIServer); err != nil {
		t.Fatal(err)
	}
	killed := time.Now()
	// The finishing pods exit and the deletions complete meanwhile; the
	// daemon's writes fail and back off.
	time.Sleep(6 * time.Second)
	if err := cp.StartComponent(ctx, controlplane.APIServer); err != nil {
		t.Fatal(err)
	}
	back := time.Now()

	inOutage := 0
	for i, p := range finishing {
		got := daemontest.WaitPod(t, c.Client, ns, p, "terminal after the outage", func(p *corev1.Pod) bool {
			return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		want := corev1.PodSucceeded
		if i%2 == 1 {
			want = corev1.PodFailed
		}
		if term := daemontest.MainContainer(got).State.Terminated; got.Status.Phase != want || term == nil || term.ExitCode != int32(i%2) {
			t.Errorf("%s: %s %+v, want %s with exit code %d", p, got.Status.Phase, daemontest.MainContainer(got).State, want, i%2)
		} else if end := term.FinishedAt.Time; !end.Before(killed.Truncate(time.Second)) && !end.After(back) {
			inOutage++
		}
	}
	for _, p := range slices.Concat(deleting, unstoppable) {
		daemontest.WaitGone(t, c.Client, ns, p, uids[p])
	}
	for _, p := range held {
		final := daemontest.WaitPod(t, c.Client, ns, p, "deleted after its terminal status was written", func(p *corev1.Pod) bool {
			return p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0
		})
		if term := daemontest.MainContainer(final).State.Terminated; final.Status.Phase != corev1.PodSucceeded || term == nil {
			t.Errorf("%s: deleted without its terminal status: %s %+v", p, final.Status.Phase, daemontest.MainContainer(final).State)
		}
	}
	t.Logf("API server down %s; %d of %d pods finished meanwhile; back to every status written and every deleted pod removed: %s",
		back.Sub(killed).Round(time.Millisecond), inOutage, n, time.Since(back).Round(time.Millisecond))
	for _, p := range held {
		patch := []byte(`{"metadata":{"finalizers":null}}`)
		if _, err := c.Client.CoreV1().Pods(ns).Patch(ctx, p, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
		daemontest.WaitGone(t, c.Client, ns, p, uids[p])
	}
	daemontest.CheckNoPanic(t, d)
}

// TestProviderFaults runs the daemon on a provider that is down for its first
// seconds (the provider config's faults), with pods whose calls fail for a
// while, hang, or whose stop the backend never confirms or always fails:
// every pod ends where it should.
func TestProviderFaults(t *testing.T) { daemontest.ForEachTransport(t, testProviderFaults) }

func testProviderFaults(t *testing.T, via daemontest.Transport) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	name := testcluster.UniqueName("vk")
	cfg := mockConfig(t, name, `{"faults": {"fail-calls": "*", "fail-for": "6s"}}`)
	started := time.Now()
	d := via.Start(t, c, nil, "--nodename", name, "--provider-config", cfg)
	daemontest.WaitNodeReady(t, c.Client, name)

	always := corev1.RestartPolicyAlways
	daemontest.CreatePods(t, c.Client, ns,
		daemontest.MockPod("plain", name, always, nil),
		daemontest.MockPod("flaky", name, always, map[string]string{mock.AnnotationFailCalls: "CreatePod,GetPod", mock.AnnotationFailFor: "10s"}),
		daemontest.MockPod("slow", name, always, map[string]string{mock.AnnotationHangCalls: "CreatePod", mock.AnnotationHangFor: "3s"}),
		daemontest.MockPod("unconfirmed", name, always, map[string]string{mock.AnnotationIgnoreStop: "true"}),
		daemontest.MockPod("undeletable", name, always, map[string]string{mock.AnnotationFailCalls: "DeletePod"}),
	)
	created := time.Now()
	settle(t, created, []outcome{
		{what: "a pod created while the provider is down runs once it is back", cond: daemontest.PodRunning(c.Client, ns, "plain")},
		{what: "a pod whose CreatePod fails for 10s runs", cond: daemontest.PodRunning(c.Client, ns, "flaky")},
		{what: "a pod whose CreatePod hangs 3s runs", cond: daemontest.PodRunning(c.Client, ns, "slow")},
		{what: "the pod whose stop is never confirmed runs", cond: daemontest.PodRunning(c.Client, ns, "unconfirmed")},
		{what: "the pod whose DeletePod always fails runs", cond: daemontest.PodRunning(c.Client, ns, "undeletable")},
	})
	t.Logf("pods created %s after the daemon started; the provider was down for its first 6s", created.Sub(started).Round(time.Millisecond))

	uids := map[string]types.UID{}
	for _, p := range []string{"unconfirmed", "undeletable"} {
		pod, err := c.Client.CoreV1().Pods(ns).Get(ctx, p, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		uids[p] = pod.UID
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](3)}); err != nil {
			t.Fatal(err)
		}
	}
	deleted := time.Now()
	settle(t, deleted, []outcome{
		{what: "the pod whose stop is never confirmed is gone after its 3s grace period", cond: daemontest.PodGone(c.Client, ns, "unconfirmed", uids["unconfirmed"])},
		{what: "the pod whose DeletePod always fails is gone after its 3s grace period", cond: daemontest.PodGone(c.Client, ns, "undeletable", uids["undeletable"])},
	})
	daemontest.CheckNoPanic(t, d)
}
