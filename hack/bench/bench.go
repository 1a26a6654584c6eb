package main

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"
)

// phaseResult is what one pass (floor or daemon) measured.
type phaseResult struct {
	// Start is when the first pod was created, DeleteStart when the first
	// was deleted.
	Start, DeleteStart time.Time
	AllRunning         time.Duration
	AllGone            time.Duration
	P50, P99           time.Duration
	Latencies          []time.Duration // create -> Running, sorted
	// GoneP50 and GoneP99 are of each pod's delete request -> gone.
	GoneP50, GoneP99 time.Duration
	// RunningCPU and GoneCPU are where the machine's CPU went from the
	// first create to all Running, and from the first delete to all gone.
	RunningCPU, GoneCPU cpuUse
	// Written holds, by phase, the status of the first pod seen Running
	// and of the first seen finished: what the pass's kubelet wrote.
	Written map[corev1.PodPhase]corev1.PodStatus
}

// tracker watches the pods of one namespace and records, per pod, when it
// was created, first seen, first seen bound to a node, first seen Running,
// and gone.
type tracker struct {
	mu       sync.Mutex
	created  map[string]time.Time
	deleting map[string]time.Time // when the bench asked to delete it
	seen     map[string]time.Time
	bound    map[string]time.Time
	running  map[string]time.Time
	gone     map[string]time.Time
	written  map[corev1.PodPhase]corev1.PodStatus // see phaseResult.Written
	n        int
	allRun   chan struct{}
	allGone  chan struct{}
	runOnce  sync.Once
	goneOnce sync.Once
	// onDeleting, if set, is called for each pod once it is being deleted
	// (the floor acts as the kubelet there).
	onDeleting func(*corev1.Pod)
	// onAdd, if set, is called for each new pod (the floor's status write).
	onAdd func(*corev1.Pod)
}

func newTracker(n int) *tracker {
	return &tracker{
		created: map[string]time.Time{}, deleting: map[string]time.Time{}, seen: map[string]time.Time{}, bound: map[string]time.Time{},
		running: map[string]time.Time{}, gone: map[string]time.Time{}, written: map[corev1.PodPhase]corev1.PodStatus{},
		n: n, allRun: make(chan struct{}), allGone: make(chan struct{}),
	}
}

func (t *tracker) observe(pod *corev1.Pod) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	firstTime(t.seen, pod.Name, now)
	if pod.Spec.NodeName != "" {
		firstTime(t.bound, pod.Name, now)
	}
	if _, ok := t.written[pod.Status.Phase]; !ok && pod.Status.Phase != corev1.PodPending {
		t.written[pod.Status.Phase] = *pod.Status.DeepCopy()
	}
	if pod.Status.Phase == corev1.PodRunning {
		if _, ok := t.running[pod.Name]; !ok {
			t.running[pod.Name] = now
			if len(t.running) == t.n {
				t.runOnce.Do(func() { close(t.allRun) })
			}
		}
	}
}

func firstTime(m map[string]time.Time, name string, now time.Time) {
	if _, ok := m[name]; !ok {
		m[name] = now
	}
}

// allAt is when the last of the n pods reached the stage m records, as an
// offset from start; 0 when not all of them did.
func (t *tracker) allAt(m map[string]time.Time, start time.Time) time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	if len(m) < t.n {
		return 0
	}
	var last time.Time
	for _, at := range m {
		if at.After(last) {
			last = at
		}
	}
	return last.Sub(start)
}

func (t *tracker) deleted(name string) {
	now := time.Now()
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.gone[name]; !ok {
		t.gone[name] = now
		if len(t.gone) == t.n {
			t.goneOnce.Do(func() { close(t.allGone) })
		}
	}
}

// watch starts an informer on the namespace's pods feeding the tracker.
func (t *tracker) watch(ctx context.Context, client kubernetes.Interface, ns string) {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(ns))
	inf := factory.Core().V1().Pods().Informer()
	_, _ = inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			pod := obj.(*corev1.Pod)
			if t.onAdd != nil {
				t.onAdd(pod)
			}
			t.observe(pod)
		},
		UpdateFunc: func(_, obj any) {
			pod := obj.(*corev1.Pod)
			t.observe(pod)
			if pod.DeletionTimestamp != nil && t.onDeleting != nil {
				t.onDeleting(pod)
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			if pod, ok := obj.(*corev1.Pod); ok {
				t.deleted(pod.Name)
			}
		},
	})
	factory.Start(ctx.Done())
	factory.WaitForCacheSync(ctx.Done())
}

func benchPod(name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"app": "bench"}},
		Spec: corev1.PodSpec{
			NodeName:    node,
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{
				Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}},
			}},
		},
	}
}

// passHooks are what a caller adds to a pass, each optional.
type passHooks struct {
	// afterRunning runs once all pods are Running, outside the timings.
	afterRunning func()
	// phase is called as each phase ("running", then "gone") starts; the
	// func it returns, as it ends (and may be called again).
	phase phaseFunc
}

// startPhase calls h.phase for the phase name, if set.
func (h passHooks) startPhase(ctx context.Context, name string) (end func()) {
	if h.phase == nil {
		return func() {}
	}
	return h.phase(ctx, name)
}

// runPass creates n pods in ns, bound to the nodes in turn, waits until all are Running,
// deletes them all gracefully and waits until all are gone.
func runPass(ctx context.Context, client kubernetes.Interface, ns string, nodes []string, n, workers int, t *tracker, hooks passHooks) (*phaseResult, error) {
	t.watch(ctx, client, ns)
	endPhase := hooks.startPhase(ctx, "running")
	defer func() { endPhase() }() // on an error; ending a phase twice is harmless
	cpu := readMachineCPU()
	start := time.Now()
	res := &phaseResult{Start: start}
	if err := parallel(ctx, n, workers, func(i int) error {
		name := fmt.Sprintf("p-%05d", i)
		t.mu.Lock()
		t.created[name] = time.Now()
		t.mu.Unlock()
		_, err := client.CoreV1().Pods(ns).Create(ctx, benchPod(name, nodes[i%len(nodes)]), metav1.CreateOptions{})
		return err
	}); err != nil {
		return nil, fmt.Errorf("creating pods: %w", err)
	}
	if err := waitFor(ctx, t.allRun, func() string { return fmt.Sprintf("%d of %d Running", t.count(t.running), n) }); err != nil {
		return nil, err
	}
	res.AllRunning = time.Since(start)
	res.RunningCPU = readMachineCPU().since(cpu)
	endPhase()
	res.Latencies = t.latencies(t.created, t.running)
	res.P50, res.P99 = percentiles(res.Latencies)
	if hooks.afterRunning != nil {
		hooks.afterRunning()
	}

	// One graceful delete per pod, as the garbage collector deletes a
	// ReplicaSet's pods (a DeleteCollection of thousands times out).
	endPhase = hooks.startPhase(ctx, "gone")
	cpu = readMachineCPU()
	start = time.Now()
	res.DeleteStart = start
	if err := parallel(ctx, n, workers, func(i int) error {
		name := fmt.Sprintf("p-%05d", i)
		t.mu.Lock()
		t.deleting[name] = time.Now()
		t.mu.Unlock()
		err := client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		return err
	}); err != nil {
		return nil, fmt.Errorf("deleting pods: %w", err)
	}
	if err := waitFor(ctx, t.allGone, func() string { return fmt.Sprintf("%d of %d gone", t.count(t.gone), n) }); err != nil {
		return nil, err
	}
	res.AllGone = time.Since(start)
	res.GoneCPU = readMachineCPU().since(cpu)
	endPhase()
	res.GoneP50, res.GoneP99 = percentiles(t.latencies(t.deleting, t.gone))
	t.mu.Lock()
	res.Written = maps.Clone(t.written) // the watch goes on after the pass
	t.mu.Unlock()
	return res, nil
}

// latencies are, for each pod in from, the time until it reached to,
// sorted.
func (t *tracker) latencies(from, to map[string]time.Time) []time.Duration {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]time.Duration, 0, len(from))
	for name, at := range from {
		out = append(out, to[name].Sub(at))
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// percentiles are the median and the 99th percentile of sorted.
func percentiles(sorted []time.Duration) (p50, p99 time.Duration) {
	if len(sorted) == 0 {
		return 0, 0
	}
	return sorted[len(sorted)*50/100], sorted[min(len(sorted)*99/100, len(sorted)-1)]
}

func (t *tracker) count(m map[string]time.Time) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(m)
}

func waitFor(ctx context.Context, done <-chan struct{}, progress func() string) error {
	tick := time.NewTicker(10 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-done:
			return nil
		case <-ctx.Done():
			return fmt.Errorf("%w (%s)", ctx.Err(), progress())
		case <-tick.C:
			logf("  ... %s", progress())
		}
	}
}

// parallel runs f(0..n-1) on workers goroutines, returning the first error.
func parallel(ctx context.Context, n, workers int, f func(int) error) error {
	var next atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := int(next.Add(1)) - 1
				if i >= n || ctx.Err() != nil {
					return
				}
				if err := f(i); err != nil {
					once.Do(func() { firstErr = err })
					return
				}
			}
		}()
	}
	wg.Wait()
	return firstErr
}

// floorKubelet is the least any kubelet must do for the bench's pods: the
// pod's bound service-account token and one status write when a pod
// arrives, and, when it is deleted, its terminal status and the final delete
// with grace period 0. It runs with many workers and no client-side rate
// limit, so it measures the API server.
type floorKubelet struct {
	client  kubernetes.Interface
	ns      string
	arrive  chan *corev1.Pod
	deleted chan *corev1.Pod
	seen    sync.Map
}

func newFloorKubelet(ctx context.Context, client kubernetes.Interface, ns string, workers int, t *tracker) *floorKubelet {
	k := &floorKubelet{client: client, ns: ns, arrive: make(chan *corev1.Pod, 100000), deleted: make(chan *corev1.Pod, 100000)}
	t.onAdd = func(p *corev1.Pod) { k.arrive <- p }
	t.onDeleting = func(p *corev1.Pod) {
		if _, dup := k.seen.LoadOrStore(p.Name, true); !dup {
			k.deleted <- p
		}
	}
	for i := 0; i < workers; i++ {
		go k.work(ctx)
	}
	return k
}

func (k *floorKubelet) work(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case p := <-k.arrive:
			k.requestTokens(ctx, p)
			k.patch(ctx, p, runningStatus(p))
		case p := <-k.deleted:
			k.patch(ctx, p, terminatedStatus(p))
			err := k.client.CoreV1().Pods(k.ns).Delete(ctx, p.Name, metav1.DeleteOptions{
				GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &p.UID},
			})
			if err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
				logf("floor: delete %s: %v", p.Name, err)
			}
		}
	}
}

// requestTokens asks for the bound service-account token of each projected
// token source the pod mounts (the kube-api-access volume the API server
// adds), as a kubelet must before it starts the pod's containers.
func (k *floorKubelet) requestTokens(ctx context.Context, p *corev1.Pod) {
	for _, v := range p.Spec.Volumes {
		if v.Projected == nil {
			continue
		}
		for _, src := range v.Projected.Sources {
			t := src.ServiceAccountToken
			if t == nil {
				continue
			}
			req := &authenticationv1.TokenRequest{Spec: authenticationv1.TokenRequestSpec{
				ExpirationSeconds: t.ExpirationSeconds,
				BoundObjectRef:    &authenticationv1.BoundObjectReference{Kind: "Pod", APIVersion: "v1", Name: p.Name, UID: p.UID},
			}}
			if t.Audience != "" {
				req.Spec.Audiences = []string{t.Audience}
			}
			if _, err := k.client.CoreV1().ServiceAccounts(k.ns).CreateToken(ctx, p.Spec.ServiceAccountName, req, metav1.CreateOptions{}); err != nil && ctx.Err() == nil {
				logf("floor: token for %s: %v", p.Name, err)
			}
		}
	}
}

func (k *floorKubelet) patch(ctx context.Context, p *corev1.Pod, s corev1.PodStatus) {
	body, _ := json.Marshal(map[string]any{"metadata": map[string]any{"uid": p.UID}, "status": s})
	if _, err := k.client.CoreV1().Pods(k.ns).Patch(ctx, p.Name, types.StrategicMergePatchType, body, metav1.PatchOptions{}, "status"); err != nil && !apierrors.IsNotFound(err) && ctx.Err() == nil {
		logf("floor: status %s: %v", p.Name, err)
	}
}

// runningStatus is the status a kubelet of this version writes for the
// bench's pod once it runs, field for field what the daemon writes for it:
// its IPs in both forms, the QoS class, the generation acted on, the
// resources allocated to each container and to the pod, and the four
// conditions the kubelet owns. A floor writing less would charge the
// daemon, in every request and watch event, for bytes any kubelet sends.
func runningStatus(p *corev1.Pod) corev1.PodStatus {
	now := metav1.Now()
	c := p.Spec.Containers[0]
	condition := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: now, ObservedGeneration: p.Generation}
	}
	return corev1.PodStatus{
		Phase: corev1.PodRunning, ObservedGeneration: p.Generation, QOSClass: corev1.PodQOSBurstable,
		HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}},
		PodIP: "10.244.0.1", PodIPs: []corev1.PodIP{{IP: "10.244.0.1"}},
		StartTime:          &now,
		AllocatedResources: c.Resources.Requests.DeepCopy(),
		Resources:          c.Resources.DeepCopy(),
		Conditions: []corev1.PodCondition{
			condition(corev1.PodReadyToStartContainers), condition(corev1.PodInitialized),
			condition(corev1.ContainersReady), condition(corev1.PodReady),
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: c.Name, Image: c.Image, ImageID: "mock://" + c.Image, ContainerID: "mock://" + string(p.UID) + "/" + c.Name,
			Ready: true, Started: ptr.To(true), State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			AllocatedResources: c.Resources.Requests.DeepCopy(), Resources: c.Resources.DeepCopy(),
		}},
	}
}

// terminatedStatus is the status a kubelet writes for the bench's pod once
// its container has completed.
func terminatedStatus(p *corev1.Pod) corev1.PodStatus {
	s := runningStatus(p)
	now := metav1.Now()
	s.Phase = corev1.PodSucceeded
	for i := range s.Conditions {
		if t := s.Conditions[i].Type; t == corev1.ContainersReady || t == corev1.PodReady {
			s.Conditions[i].Status, s.Conditions[i].Reason = corev1.ConditionFalse, "PodCompleted"
		}
	}
	cs := &s.ContainerStatuses[0]
	cs.Ready, cs.Started = false, ptr.To(false)
	cs.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		Reason: "Completed", StartedAt: cs.State.Running.StartedAt, FinishedAt: now, ContainerID: cs.ContainerID,
	}}
	return s
}
