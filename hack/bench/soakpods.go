package main

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// soakPodKind is what a soak pod does in its short life.
type soakPodKind int

const (
	// exitsZero runs a few seconds and exits 0 on its own: Succeeded.
	exitsZero soakPodKind = iota
	// exitsThree runs a few seconds and exits 3 on its own: Failed.
	exitsThree
	// deletedRunning runs until the soak deletes it, a few seconds after it
	// is Running; logs, exec and port-forward sessions pick these.
	deletedRunning
)

// soakKindOf spreads the kinds over i from 0 to 9: two exit 0, two exit 3,
// six are deleted while running.
func soakKindOf(i int) soakPodKind {
	switch i % 10 {
	case 0, 1:
		return exitsZero
	case 2, 3:
		return exitsThree
	}
	return deletedRunning
}

// echoPort is the container port the soak's pods declare, where the mock
// answers port-forwards with an echo.
const echoPort = 8080

// soakPod is pod i of the churn on node, of its kind.
func soakPod(i int, node string, kind soakPodKind) *corev1.Pod {
	p := benchPod(fmt.Sprintf("soak-%d", i), node)
	p.Labels["app"] = "soak"
	p.Spec.RestartPolicy = corev1.RestartPolicyNever
	p.Spec.TerminationGracePeriodSeconds = ptr.To[int64](2)
	p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: echoPort}}
	// A log line every 200 ms, so that a logs -f stream has lines.
	p.Annotations = map[string]string{mock.AnnotationLogInterval: "200ms"}
	switch kind {
	case exitsZero, exitsThree:
		p.Annotations[mock.AnnotationRunFor] = fmt.Sprintf("%dms", 1000+rand.IntN(3000))
		p.Annotations[mock.AnnotationExitCode] = strconv.Itoa(int(kind.exitCode()))
	}
	return p
}

// exitCode is what a pod of the kind exits with on its own.
func (k soakPodKind) exitCode() int32 {
	if k == exitsThree {
		return 3
	}
	return 0
}

// terminalPhase is the phase a pod of the kind ends in on its own.
func (k soakPodKind) terminalPhase() corev1.PodPhase {
	if k == exitsThree {
		return corev1.PodFailed
	}
	return corev1.PodSucceeded
}

// terminalStatusKept says whether p shows the terminal status a pod of kind k
// exits with: its phase, and its container terminated with the exit code.
func terminalStatusKept(p *corev1.Pod, k soakPodKind) bool {
	if p.Status.Phase != k.terminalPhase() {
		return false
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == "main" {
			return cs.State.Terminated != nil && cs.State.Terminated.ExitCode == k.exitCode()
		}
	}
	return false
}

// soakOutcomes counts what became of the churn's pods.
type soakOutcomes struct {
	Created      int
	CreateFailed int // the API server refused the create until the bound
	// Exited reached their terminal status with their exit code; Deleted
	// ran, were deleted while running and are gone.
	Exited, Deleted int
	// Stuck did not reach the expected state within the bound, by the
	// state they were waiting for.
	Stuck map[string]int
	// LostTerminal exited on their own but did not show the terminal
	// phase with their exit code (within the bound).
	LostTerminal int
}

func (o soakOutcomes) stuck() int {
	n := 0
	for _, v := range o.Stuck {
		n += v
	}
	return n
}

func (o soakOutcomes) String() string {
	var where []string
	for k, v := range o.Stuck {
		where = append(where, fmt.Sprintf("%d %s", v, k))
	}
	sort.Strings(where)
	s := fmt.Sprintf("%d created (%d creates refused until the bound), %d exited with their status and exit code, %d deleted while running; stuck: %d",
		o.Created, o.CreateFailed, o.Exited, o.Deleted, o.stuck())
	if len(where) > 0 {
		s += " (" + strings.Join(where, ", ") + ")"
	}
	return s + fmt.Sprintf("; lost terminal status: %d", o.LostTerminal)
}

// soakWatch follows the namespace's pods through an informer, which
// re-lists and watches again across API server restarts, and wakes the
// goroutine waiting on each pod.
type soakWatch struct {
	mu   sync.Mutex
	pods map[string]*watchedPod
	// running are the deletedRunning pods now Running, with the time the
	// soak deletes each: the streams pick them.
	running map[string]time.Time
}

// watchedPod is the latest state of one pod the soak waits on.
type watchedPod struct {
	pod     *corev1.Pod // latest seen; nil before the first
	gone    bool
	changed chan struct{} // capacity 1: a pending wake-up
}

func startSoakWatch(ctx context.Context, client kubernetes.Interface, ns string) (*soakWatch, error) {
	w := &soakWatch{pods: map[string]*watchedPod{}, running: map[string]time.Time{}}
	f := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := f.Core().V1().Pods().Informer()
	_, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.seen(obj, false) },
		UpdateFunc: func(_, obj any) { w.seen(obj, false) },
		DeleteFunc: func(obj any) {
			if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = t.Obj
			}
			w.seen(obj, true)
		},
	})
	if err != nil {
		return nil, err
	}
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		return nil, fmt.Errorf("the pod informer of %s did not sync", ns)
	}
	return w, nil
}

func (w *soakWatch) seen(obj any, gone bool) {
	p, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	wp := w.pods[p.Name]
	if wp == nil {
		return
	}
	wp.pod, wp.gone = p, gone
	select {
	case wp.changed <- struct{}{}:
	default:
	}
}

// add starts following the pod called name, before it is created.
func (w *soakWatch) add(name string) *watchedPod {
	wp := &watchedPod{changed: make(chan struct{}, 1)}
	w.mu.Lock()
	w.pods[name] = wp
	w.mu.Unlock()
	return wp
}

func (w *soakWatch) forget(name string) {
	w.mu.Lock()
	delete(w.pods, name)
	delete(w.running, name)
	w.mu.Unlock()
}

// until waits up to bound for cond to hold of the pod's latest state; it
// returns the last state seen and whether cond held.
func (w *soakWatch) until(ctx context.Context, wp *watchedPod, bound time.Duration, cond func(p *corev1.Pod, gone bool) bool) (*corev1.Pod, bool) {
	timer := time.NewTimer(bound)
	defer timer.Stop()
	for {
		w.mu.Lock()
		p, gone := wp.pod, wp.gone
		w.mu.Unlock()
		if p != nil && cond(p, gone) {
			return p, true
		}
		select {
		case <-wp.changed:
		case <-timer.C:
			return p, false
		case <-ctx.Done():
			return p, false
		}
	}
}

// markRunning offers a Running pod to the streams until deleteAt.
func (w *soakWatch) markRunning(name string, deleteAt time.Time) {
	w.mu.Lock()
	w.running[name] = deleteAt
	w.mu.Unlock()
}

// pickRunning returns a Running pod that is not deleted for at least
// minLeft, or "".
func (w *soakWatch) pickRunning(minLeft time.Duration) string {
	w.mu.Lock()
	defer w.mu.Unlock()
	now := time.Now()
	for name, at := range w.running { // map order: a random pick
		if at.Sub(now) >= minLeft {
			return name
		}
	}
	return ""
}

// soakChurn creates and deletes pods at a steady rate and counts what
// became of them.
type soakChurn struct {
	client kubernetes.Interface
	ns     string
	watch  *soakWatch
	// bound is how long a pod may take to reach each expected state.
	bound time.Duration

	mu       sync.Mutex
	outcomes soakOutcomes
}

// run creates perMinute pods a minute on nodes, round robin, until ctx
// ends, with at most maxInFlight alive at once, and waits for every pod's
// life to end (within its bounds); podCtx cancels the pods' lives early.
func (c *soakChurn) run(ctx, podCtx context.Context, perMinute, maxInFlight int, nodes []string) {
	tick := time.NewTicker(time.Minute / time.Duration(perMinute))
	defer tick.Stop()
	slots := make(chan struct{}, maxInFlight)
	var wg sync.WaitGroup
	defer wg.Wait()
	for i := 0; ; i++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		select {
		case <-ctx.Done():
			return
		case slots <- struct{}{}:
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { <-slots }()
			kind := soakKindOf(rand.IntN(10))
			c.life(podCtx, soakPod(i, nodes[i%len(nodes)], kind), kind)
		}()
	}
}

// life is one pod's: created, its expected state, deleted, gone.
func (c *soakChurn) life(ctx context.Context, pod *corev1.Pod, kind soakPodKind) {
	wp := c.watch.add(pod.Name)
	defer c.watch.forget(pod.Name)
	pods := c.client.CoreV1().Pods(c.ns)
	if !retryUntil(ctx, c.bound, func() bool {
		_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
		return err == nil || apierrors.IsAlreadyExists(err) // a retry after a lost answer
	}) {
		c.count(func(o *soakOutcomes) { o.CreateFailed++ })
		return
	}
	c.count(func(o *soakOutcomes) { o.Created++ })
	ran := false // a deletedRunning pod that ran
	switch kind {
	case exitsZero, exitsThree:
		last, ok := c.watch.until(ctx, wp, c.bound, func(p *corev1.Pod, gone bool) bool {
			return gone || p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
		})
		if !ok || !terminalStatusKept(last, kind) {
			c.count(func(o *soakOutcomes) { o.LostTerminal++; c.stuck(o, ok, "not terminal") })
			if !ok {
				break
			}
		} else {
			c.count(func(o *soakOutcomes) { o.Exited++ })
		}
	case deletedRunning:
		_, ok := c.watch.until(ctx, wp, c.bound, func(p *corev1.Pod, gone bool) bool {
			return !gone && p.Status.Phase == corev1.PodRunning
		})
		if !ok {
			c.count(func(o *soakOutcomes) { c.stuck(o, false, "not Running") })
			break
		}
		ran = true
		life := time.Duration(3000+rand.IntN(27000)) * time.Millisecond
		c.watch.markRunning(pod.Name, time.Now().Add(life))
		select {
		case <-time.After(life):
		case <-ctx.Done():
		}
	}
	if !retryUntil(ctx, c.bound, func() bool {
		err := pods.Delete(ctx, pod.Name, metav1.DeleteOptions{})
		return err == nil || apierrors.IsNotFound(err)
	}) {
		c.count(func(o *soakOutcomes) { c.stuck(o, false, "delete refused") })
		return
	}
	if _, ok := c.watch.until(ctx, wp, c.bound, func(_ *corev1.Pod, gone bool) bool { return gone }); !ok {
		c.count(func(o *soakOutcomes) { c.stuck(o, false, "not gone") })
	} else if ran {
		c.count(func(o *soakOutcomes) { o.Deleted++ })
	}
}

// stuck counts a pod stuck waiting for what, unless reached.
func (c *soakChurn) stuck(o *soakOutcomes, reached bool, what string) {
	if reached {
		return
	}
	if o.Stuck == nil {
		o.Stuck = map[string]int{}
	}
	o.Stuck[what]++
}

func (c *soakChurn) count(f func(*soakOutcomes)) {
	c.mu.Lock()
	defer c.mu.Unlock()
	f(&c.outcomes)
}

// retryUntil calls try every second until it succeeds, for up to bound:
// the API server may be restarting.
func retryUntil(ctx context.Context, bound time.Duration, try func() bool) bool {
	deadline := time.Now().Add(bound)
	for {
		if try() {
			return true
		}
		if time.Now().After(deadline) || ctx.Err() != nil {
			return false
		}
		select {
		case <-time.After(time.Second):
		case <-ctx.Done():
			return false
		}
	}
}
