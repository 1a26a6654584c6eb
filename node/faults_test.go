//go:build e2e

package node_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/util/workqueue"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
	"github.com/vkubelet/virtual-kubelet/node/queue"
)

// faultyProvider fails chosen calls with a transient error until a time, and
// records the grace period of every DeletePod.
type faultyProvider struct {
	notifyingProvider

	mu        sync.Mutex
	failUntil map[string]time.Time
	graces    map[string][]int64
}

func newFaultyProvider() *faultyProvider {
	return &faultyProvider{
		notifyingProvider: notifyingProvider{newTestProvider()},
		failUntil:         map[string]time.Time{},
		graces:            map[string][]int64{},
	}
}

var errBackendDown = errors.New("backend unavailable (injected)")

// failFor makes op fail for d from now.
func (p *faultyProvider) failFor(op string, d time.Duration) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failUntil[op] = time.Now().Add(d)
}

func (p *faultyProvider) fault(op string) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if time.Now().Before(p.failUntil[op]) {
		p.testProvider.mu.Lock()
		p.calls[op+"Failed"]++
		p.testProvider.mu.Unlock()
		return errBackendDown
	}
	return nil
}

func (p *faultyProvider) deleteGraces(name string) []int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return append([]int64(nil), p.graces[name]...)
}

func (p *faultyProvider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	if err := p.fault("CreatePod"); err != nil {
		return err
	}
	if pod.Labels["test.vkubelet.io/quiet"] == "true" {
		// Accepted, but never a word about it: no status at all.
		p.testProvider.mu.Lock()
		p.calls["CreatePod"]++
		p.pods[key(pod.Namespace, pod.Name)] = pod.DeepCopy()
		p.testProvider.mu.Unlock()
		return nil
	}
	return p.testProvider.CreatePod(ctx, pod)
}

func (p *faultyProvider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	if err := p.fault("DeletePod"); err != nil {
		return err
	}
	p.mu.Lock()
	p.graces[pod.Name] = append(p.graces[pod.Name], ptr.Deref(pod.DeletionGracePeriodSeconds, -1))
	p.mu.Unlock()
	return p.testProvider.DeletePod(ctx, pod)
}

// fastRetries is a sync queue limiter that makes the old give-up-after-20
// policy give up within a fraction of a second.
func fastRetries(cfg *nodeutil.Config) {
	configure := cfg.ConfigurePodController
	cfg.ConfigurePodController = func(pc *node.PodControllerConfig) {
		if configure != nil {
			configure(pc)
		}
		pc.SyncPodsFromKubernetesRateLimiter = workqueue.NewTypedItemExponentialFailureRateLimiter[any](time.Millisecond, 20*time.Millisecond)
		pc.GracePeriodMargin = time.Second
	}
}

// TestSyncRetriesOutlastProviderOutage: a provider failing CreatePod and
// DeletePod for longer than the old give-up window (MaxRetries tries at the
// test's fast backoff) recovers, and every pod ends where it should.
func TestSyncRetriesOutlastProviderOutage(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := newFaultyProvider()
	_, nodeName := startNode(t, c, p, fastRetries)

	outage := 3 * time.Second
	p.failFor("CreatePod", outage)
	started := time.Now()
	const n = 5
	for i := range n {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, newPod(ns, nodeName, fmt.Sprintf("p%d", i)), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		waitPod(t, c.Client, ns, fmt.Sprintf("p%d", i), "Running after the outage", phaseIs(corev1.PodRunning))
	}
	t.Logf("%d pods Running %s after a %s CreatePod outage; %d failed CreatePod calls", n, time.Since(started).Round(time.Millisecond), outage, p.count("CreatePodFailed"))
	if failed := p.count("CreatePodFailed"); failed <= n*queue.MaxRetries {
		t.Errorf("the outage was meant to outlast %d tries per pod; only %d failed calls in all", queue.MaxRetries, failed)
	}
	if got := p.count("CreatePod"); got != n {
		t.Errorf("CreatePod succeeded %d times for %d pods", got, n)
	}

	// DeletePod failing for a while (less than the grace period): the
	// provider's own terminal status still ends each pod.
	p.failFor("DeletePod", 2*time.Second)
	for i := range n {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("p%d", i), metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		waitGone(t, c.Client, ns, fmt.Sprintf("p%d", i))
	}
	if p.count("DeletePodFailed") == 0 || p.count("DeletePod") < n {
		t.Errorf("DeletePod: %d failed, %d succeeded", p.count("DeletePodFailed"), p.count("DeletePod"))
	}
}

// finalState watches pod ns/name and returns the object of its DELETED
// event: the last state the API server had.
func finalState(t *testing.T, c *testcluster.Cluster, ns, name string, deleteIt func()) (*corev1.Pod, time.Duration) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	w, err := c.Client.CoreV1().Pods(ns).Watch(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	start := time.Now()
	deleteIt()
	for ev := range w.ResultChan() {
		if ev.Type == watch.Deleted {
			return ev.Object.(*corev1.Pod), time.Since(start)
		}
	}
	t.Fatalf("pod %s/%s not deleted within %s", ns, name, timeout)
	return nil, 0
}

// TestStopNeverConfirmed: a provider that accepts DeletePod but never reports
// the pod stopped (one pod Running, one that never had any status) does not
// leave the pods Terminating: once the grace period and the margin have
// passed, the controller writes a terminal status, records an Event and
// removes the object.
func TestStopNeverConfirmed(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := newFaultyProvider()
	p.holdTerminal = true
	_, nodeName := startNode(t, c, p, fastRetries)

	runPod(t, c, ns, nodeName, "running")
	quiet := newPod(ns, nodeName, "quiet")
	quiet.Labels = map[string]string{"test.vkubelet.io/quiet": "true"}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, quiet, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "quiet pod handed to the provider", func() (bool, string) { return p.pod(ns, "quiet") != nil, "" })

	const grace = 2
	for _, name := range []string{"running", "quiet"} {
		last, took := finalState(t, c, ns, name, func() {
			if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](grace)}); err != nil {
				t.Fatal(err)
			}
		})
		t.Logf("%s: gone %s after a delete with a %ds grace period and a 1s margin", name, took.Round(time.Millisecond), grace)
		if last.Status.Phase != corev1.PodFailed || last.Status.Reason != node.ReasonProviderDidNotStop {
			t.Errorf("%s: final phase %s reason %q, want Failed %s", name, last.Status.Phase, last.Status.Reason, node.ReasonProviderDidNotStop)
		}
		if len(last.Status.ContainerStatuses) != 1 {
			t.Fatalf("%s: want 1 container status, got %+v", name, last.Status.ContainerStatuses)
		}
		term := last.Status.ContainerStatuses[0].State.Terminated
		if term == nil || term.ExitCode != 137 || term.Reason != node.ReasonProviderDidNotStop {
			t.Errorf("%s: container not terminated by the controller: %+v", name, last.Status.ContainerStatuses[0].State)
		} else if term.FinishedAt.Before(last.DeletionTimestamp) {
			t.Errorf("%s: terminated at %s, before the grace period ended at %s", name, term.FinishedAt, last.DeletionTimestamp)
		}
		eventually(t, name+": ProviderDidNotStop event", func() (bool, string) {
			evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + node.ReasonProviderDidNotStop})
			if err != nil {
				return false, err.Error()
			}
			return len(evs.Items) > 0, "no event"
		})
	}
}

// TestGracePeriodShortenedAndForced: a second delete with a shorter grace
// period, and a forced delete, reach the provider as further DeletePod calls
// with the new grace period, and the pods go. The provider keeps its pods
// (holdTerminal), so once one is gone from the API server each provider
// resync deletes it again as an orphan: only the second call is checked.
func TestGracePeriodShortenedAndForced(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := newFaultyProvider()
	p.holdTerminal = true // the provider honours the long grace period
	_, nodeName := startNode(t, c, p, fastRetries)

	for _, name := range []string{"shortened", "forced"} {
		runPod(t, c, ns, nodeName, name)
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](300)}); err != nil {
			t.Fatal(err)
		}
		eventually(t, name+": DeletePod with 300s", func() (bool, string) {
			g := p.deleteGraces(name)
			return len(g) == 1 && g[0] == 300, fmt.Sprint(g)
		})
	}

	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "shortened", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "shortened: DeletePod again with 1s", func() (bool, string) {
		g := p.deleteGraces("shortened")
		return len(g) >= 2 && g[1] == 1, fmt.Sprint(g)
	})
	waitGone(t, c.Client, ns, "shortened")

	// kubectl delete --force --grace-period=0
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "forced", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	waitGone(t, c.Client, ns, "forced")
	eventually(t, "forced: DeletePod again with 0s", func() (bool, string) {
		g := p.deleteGraces("forced")
		return len(g) >= 2 && g[1] == 0, fmt.Sprint(g)
	})
}

// TestStoppedPodToldOnce: a pod the provider stopped within its grace
// period is removed with grace 0 by the controller; that last step is not
// a shorter grace period to pass on, so DeletePod is called once. (A
// provider with a rate-limited backend paid a second delete per pod.)
func TestStoppedPodToldOnce(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := newFaultyProvider()
	_, nodeName := startNode(t, c, p, fastRetries)

	names := []string{"a", "b", "c"}
	for _, name := range names {
		runPod(t, c, ns, nodeName, name)
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range names {
		waitGone(t, c.Client, ns, name)
	}
	// The removal's own update may still be in the queue: let it drain.
	time.Sleep(time.Second)
	for _, name := range names {
		if g := p.deleteGraces(name); len(g) != 1 || g[0] != 30 {
			t.Errorf("%s: DeletePod graces %v, want [30]", name, g)
		}
	}
}

// mutatingProvider changes every pod it is handed after the call returns,
// and every pod it reports after reporting it, as a careless provider may:
// with -race, any object the controller shares with it shows up as a race.
type mutatingProvider struct {
	notifyingProvider
	wg sync.WaitGroup
}

func (p *mutatingProvider) scribble(pod *corev1.Pod) {
	p.wg.Add(1)
	go func() {
		defer p.wg.Done()
		for i := range 50 {
			pod.Labels = map[string]string{"scribbled": fmt.Sprint(i)}
			pod.Status.Phase = corev1.PodUnknown
			pod.Status.Message = fmt.Sprint(i)
			if len(pod.Spec.Containers) > 0 {
				pod.Spec.Containers[0].Image = fmt.Sprint(i)
			}
			if len(pod.Status.ContainerStatuses) > 0 {
				pod.Status.ContainerStatuses[0].RestartCount = int32(i)
			}
			time.Sleep(time.Millisecond)
		}
	}()
}

func (p *mutatingProvider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	defer p.scribble(pod)
	return p.notifyingProvider.CreatePod(ctx, pod)
}

func (p *mutatingProvider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	defer p.scribble(pod)
	return p.notifyingProvider.UpdatePod(ctx, pod)
}

func (p *mutatingProvider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	defer p.scribble(pod)
	return p.notifyingProvider.DeletePod(ctx, pod)
}

func (p *mutatingProvider) NotifyPods(ctx context.Context, f func(*corev1.Pod)) {
	p.notifyingProvider.NotifyPods(ctx, func(pod *corev1.Pod) {
		f(pod)
		p.scribble(pod)
	})
}

// TestProvidersGetCopies runs pods through create, update and delete with a
// provider that mutates everything it receives and reports. The race
// detector fails the test if the controller shares an object with it; the
// API server must hold what the provider reported, not its scribbles.
func TestProvidersGetCopies(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := &mutatingProvider{notifyingProvider: notifyingProvider{newTestProvider()}}
	t.Cleanup(p.wg.Wait)
	_, nodeName := startNode(t, c, p, nil)

	for i := range 3 {
		name := fmt.Sprintf("p%d", i)
		running := runPod(t, c, ns, nodeName, name)
		if running.Status.Message != "" || running.Spec.Containers[0].Image != "busybox" {
			t.Errorf("%s: the provider's scribbles reached the API server: %+v", name, running.Status)
		}
		running.Labels = map[string]string{"updated": "yes"}
		if _, err := c.Client.CoreV1().Pods(ns).Update(ctx, running, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	eventually(t, "updates reached the provider", func() (bool, string) { return p.count("UpdatePod") >= 3, "" })
	for i := range 3 {
		if err := c.Client.CoreV1().Pods(ns).Delete(ctx, fmt.Sprintf("p%d", i), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		waitGone(t, c.Client, ns, fmt.Sprintf("p%d", i))
	}
}

// TestRestartAdoptsRunningPods stops the controllers (as a crash would: no
// clean-up) and starts new ones on the same node with the same backend:
// running pods are adopted, never created again, with the status the
// backend has now (one finished meanwhile); a pod the backend lost meanwhile
// is marked Failed (restartPolicy Never); a pod deleted meanwhile finishes.
func TestRestartAdoptsRunningPods(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := newFaultyProvider()
	name := testcluster.UniqueName("vk")
	sameNode := func(cfg *nodeutil.Config) { cfg.Node = nodeSpec(name) }

	first, _ := startNode(t, c, p, sameNode)
	running := map[string]*corev1.Pod{}
	for _, pod := range []string{"adopted", "deleted", "finished"} {
		running[pod] = runPod(t, c, ns, name, pod)
	}
	lost := newPod(ns, name, "lost")
	lost.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, lost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c.Client, ns, "lost", "Running", phaseIs(corev1.PodRunning))
	created, listed := p.count("CreatePod"), p.count("GetPods")
	stopNode(t, first)

	p.lose(ns, "lost")
	p.finish(running["finished"], 0) // news that reaches no controller
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "deleted", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Fatal(err)
	}
	restarted := time.Now()
	startNode(t, c, p, sameNode)

	failed := waitPod(t, c.Client, ns, "lost", "Failed after the restart", phaseIs(corev1.PodFailed))
	if failed.Status.Reason != node.ReasonProviderLost {
		t.Errorf("lost pod: reason %q, want %s", failed.Status.Reason, node.ReasonProviderLost)
	}
	waitGone(t, c.Client, ns, "deleted")
	waitPod(t, c.Client, ns, "finished", "Succeeded, as the provider has it after the restart", phaseIs(corev1.PodSucceeded))
	t.Logf("restart reconciled in %s", time.Since(restarted).Round(time.Millisecond))
	// Give the new controllers time to do anything they would do wrong.
	time.Sleep(time.Second)
	if got := p.count("CreatePod"); got != created {
		t.Errorf("CreatePod called %d times after the restart; a running or lost pod must never be created again", got-created)
	}
	if p.pod(ns, "adopted") == nil {
		t.Error("the adopted pod is no longer in the provider")
	}
	if pod := waitPod(t, c.Client, ns, "adopted", "Running", phaseIs(corev1.PodRunning)); pod.DeletionTimestamp != nil {
		t.Error("the adopted pod is being deleted")
	}
	if p.count("GetPod "+key(ns, "adopted")) == 0 {
		t.Error("the pod the provider had at the start was adopted without asking the provider for it")
	}

	// The new controller listed the provider's pods when it started; a pod
	// created since is not among them, so it is created without a GetPod.
	eventually(t, "the provider's pods listed at the start", func() (bool, string) {
		n := p.count("GetPods")
		return n > listed, fmt.Sprintf("%d listings", n)
	})
	runPod(t, c, ns, name, "new")
	if n := p.count("GetPod " + key(ns, "new")); n != 0 {
		t.Errorf("GetPod called %d times for a pod created after the start listing; want none", n)
	}
}

// stopNode cancels a node started by startNode and waits for it to stop.
func stopNode(t *testing.T, n *nodeutil.Node) {
	t.Helper()
	cancel, _ := nodeCancels.Load(n)
	cancel.(context.CancelFunc)()
	select {
	case <-n.Done():
	case <-time.After(timeout):
		t.Fatal("node did not stop")
	}
}
