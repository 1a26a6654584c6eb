package mock

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// Pod annotations that inject faults, so the mock behaves as a backend on a
// bad day. Unlike the script annotations they apply to the whole pod. A bad
// value makes CreatePod and UpdatePod fail with an InvalidInput error naming
// the annotation.
const (
	// AnnotationFailCalls lists the provider calls that fail for the pod
	// with a transient error (not an errdefs one, so the controller
	// retries): a comma list of CreatePod, UpdatePod, DeletePod,
	// GetPodStatus and GetPod, or "*" for all of them.
	AnnotationFailCalls = "mock.vkubelet.io/fail-calls"
	// AnnotationFailFor limits those failures to a duration, e.g. "2m",
	// counted from the first call the mock saw for the pod's UID; after it
	// the calls succeed (the backend recovers). Without it they fail for
	// ever.
	AnnotationFailFor = "mock.vkubelet.io/fail-for"
	// AnnotationHangCalls lists the calls (as AnnotationFailCalls) that
	// block before doing their work. At most a quarter of the node's
	// pod-sync workers hang at once: a call past that runs at once, and the
	// pod gets a Warning Event (ReasonHangRefused) naming the bound.
	AnnotationHangCalls = "mock.vkubelet.io/hang-calls"
	// AnnotationHangFor is how long each of those calls blocks, e.g. "10s",
	// at most MaxHang; without it, until the caller's context is done or
	// MaxHang has passed. A call whose context is done first returns the
	// context's error.
	AnnotationHangFor = "mock.vkubelet.io/hang-for"
	// AnnotationIgnoreStop "true" makes DeletePod return nil without
	// stopping the pod, as a backend that never confirms a stop: the pod
	// keeps running, is reported Running and stays in GetPods.
	AnnotationIgnoreStop = "mock.vkubelet.io/ignore-stop"
)

// MaxHang is the longest a call hangs: the pod controller gives provider
// calls no deadline, and a call that never returns would hold one of the
// node's few workers for good.
const MaxHang = time.Minute

// faultPrefix is what the fault annotations share; the provider config's
// faults use the names after it.
const faultPrefix = "mock.vkubelet.io/"

// call is one provider method, as a bit in a callSet.
type call uint8

const (
	callCreatePod call = 1 << iota
	callUpdatePod
	callDeletePod
	callGetPodStatus
	callGetPod
	callGetPods
)

// callNames are the names fault settings use, in the order errors list them.
var callNames = []struct {
	name string
	call call
}{
	{"CreatePod", callCreatePod}, {"UpdatePod", callUpdatePod}, {"DeletePod", callDeletePod},
	{"GetPodStatus", callGetPodStatus}, {"GetPod", callGetPod}, {"GetPods", callGetPods},
}

func (c call) String() string {
	for _, n := range callNames {
		if n.call == c {
			return n.name
		}
	}
	return "unknown call"
}

// callSet is a set of calls.
type callSet uint8

func (s callSet) has(c call) bool { return s&callSet(c) != 0 }

// podCalls are the calls made for one pod, the ones annotations can name;
// the provider config may name GetPods too.
const (
	podCalls  = callSet(callCreatePod | callUpdatePod | callDeletePod | callGetPodStatus | callGetPod)
	nodeCalls = podCalls | callSet(callGetPods)
)

// faultSpec is what to do wrong, from a pod's annotations or the provider
// config.
type faultSpec struct {
	fail       callSet
	failFor    time.Duration // 0: for ever
	hang       callSet
	hangFor    time.Duration // 0: until the caller's context is done, at most MaxHang
	ignoreStop bool
}

// parseFaults reads fault settings from values, keyed by prefix followed by
// fail-calls, fail-for, hang-calls, hang-for and (when allowed names
// DeletePod and prefix is the annotations') ignore-stop. Errors name the key.
func parseFaults(values map[string]string, prefix string, allowed callSet) (faultSpec, error) {
	var f faultSpec
	var err error
	if f.fail, err = parseCalls(values, prefix+"fail-calls", allowed); err != nil {
		return f, err
	}
	if f.hang, err = parseCalls(values, prefix+"hang-calls", allowed); err != nil {
		return f, err
	}
	if f.failFor, err = parseFaultDuration(values, prefix+"fail-for", prefix+"fail-calls", f.fail); err != nil {
		return f, err
	}
	if f.hangFor, err = parseFaultDuration(values, prefix+"hang-for", prefix+"hang-calls", f.hang); err != nil {
		return f, err
	}
	if f.hangFor > MaxHang {
		return f, fmt.Errorf("%shang-for: %q is above the maximum of %s", prefix, values[prefix+"hang-for"], MaxHang)
	}
	if v, ok := values[AnnotationIgnoreStop]; ok && prefix == faultPrefix {
		if f.ignoreStop, err = strconv.ParseBool(v); err != nil {
			return f, fmt.Errorf("%s: %q is not a boolean (true or false)", AnnotationIgnoreStop, v)
		}
	}
	return f, nil
}

func parseCalls(values map[string]string, key string, allowed callSet) (callSet, error) {
	v, ok := values[key]
	if !ok {
		return 0, nil
	}
	var known []string
	for _, n := range callNames {
		if allowed.has(n.call) {
			known = append(known, n.name)
		}
	}
	var set callSet
	for _, name := range strings.Split(v, ",") {
		name = strings.TrimSpace(name)
		if name == "*" {
			set |= allowed
			continue
		}
		found := false
		for _, n := range callNames {
			if n.name == name && allowed.has(n.call) {
				set, found = set|callSet(n.call), true
			}
		}
		if !found {
			return 0, fmt.Errorf("%s: %q is not a provider call (a comma list of %s, or *)", key, name, strings.Join(known, ", "))
		}
	}
	return set, nil
}

func parseFaultDuration(values map[string]string, key, callsKey string, calls callSet) (time.Duration, error) {
	v, ok := values[key]
	if !ok {
		return 0, nil
	}
	if calls == 0 {
		return 0, fmt.Errorf("%s is set without %s: say which calls it applies to", key, callsKey)
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, fmt.Errorf("%s: %q is not a positive duration (e.g. 1.5s, 2m)", key, v)
	}
	return d, nil
}

// unknownWorkers is the pod-sync worker count the mock assumes when it is
// not told (a plugin process): the fewest of which one hang is a quarter.
const unknownWorkers = 4

// faults is a provider's fault injection: the provider config's faults for
// every pod, and the pods' own.
type faults struct {
	// node applies to every pod; its fail-for counts from start.
	node  faultSpec
	start time.Time
	// maxHang bounds a hang without hang-for: MaxHang.
	maxHang time.Duration
	// nodeName and workers (the node's pod-sync workers) are for the
	// message of a refused hang; events records it on the pod.
	nodeName string
	workers  int
	events   podEvents
	// maxHanging is how many calls may hang at once at their pods'
	// annotations: a quarter of the workers, so that pods asking for hangs
	// never hold the workers every other pod of the node needs. The
	// provider config's hangs are the operator's, and not counted.
	maxHanging int

	mu sync.Mutex
	// hanging counts the calls hanging at their pods' annotations.
	hanging int
	// firstCall is when the mock first saw a call for a pod with a
	// fail-for. A UID is forgotten when DeletePod does its work for it, so
	// the map holds only pods the mock runs or is still asked about.
	firstCall map[types.UID]time.Time
}

// newFaults injects the provider config's faults (node) and the pods' into
// the calls of node nodeName, whose pod controller queues have workers
// workers each (0: unknown).
func newFaults(nodeName string, node faultSpec, workers int, events podEvents) *faults {
	if workers <= 0 {
		workers = unknownWorkers
	}
	return &faults{
		node: node, start: time.Now(), maxHang: MaxHang,
		nodeName: nodeName, workers: workers, events: events, maxHanging: workers / 4,
	}
}

// injectFaults runs the faults of call c on pod before the call does its
// work. When handled is true the call must return err at once.
func (p *Provider) injectFaults(ctx context.Context, c call, pod *corev1.Pod) (handled bool, err error) {
	spec, err := parseFaults(pod.Annotations, faultPrefix, podCalls)
	if err != nil {
		if c == callCreatePod || c == callUpdatePod {
			return true, errdefs.InvalidInputf("annotation %v", err)
		}
		// Only a spec change can make them invalid, and UpdatePod refused it.
		spec = faultSpec{}
	}
	if c == callCreatePod {
		p.forgetReplaced(pod)
	}
	handled, err = p.faults.inject(ctx, c, pod.Namespace, pod.Name, pod.UID, spec)
	if !handled && c == callDeletePod {
		p.faults.forget(pod.UID)
	}
	return handled, err
}

// injectFaultsByName is injectFaults for the calls that name a pod: the
// pod's annotations are the ones the mock keeps.
func (p *Provider) injectFaultsByName(ctx context.Context, c call, namespace, name string) (handled bool, err error) {
	var spec faultSpec
	var uid types.UID
	p.mu.Lock()
	if ps, ok := p.pods[podKey(namespace, name)]; ok {
		// CreatePod or UpdatePod validated them.
		spec, _ = parseFaults(ps.pod.annotations, faultPrefix, podCalls)
		uid = ps.pod.uid
	}
	p.mu.Unlock()
	return p.faults.inject(ctx, c, namespace, name, uid, spec)
}

// injectNodeFaults runs the provider config's faults of a call that
// concerns no pod (GetPods).
func (p *Provider) injectNodeFaults(ctx context.Context, c call) (handled bool, err error) {
	return p.faults.inject(ctx, c, "", "", "", faultSpec{})
}

// forgetReplaced forgets the pod of the same name that pod replaces.
func (p *Provider) forgetReplaced(pod *corev1.Pod) {
	p.mu.Lock()
	old, ok := p.pods[podKey(pod.Namespace, pod.Name)]
	p.mu.Unlock()
	if ok && old.pod.uid != pod.UID {
		p.faults.forget(old.pod.uid)
	}
}

func (f *faults) inject(ctx context.Context, c call, namespace, name string, uid types.UID, pod faultSpec) (bool, error) {
	if hang, d, own := f.hangs(c, pod); hang {
		if err := f.hang(ctx, c, namespace, name, uid, d, own); err != nil {
			return true, err
		}
	}
	now := time.Now()
	if pod.fail.has(c) && (pod.failFor == 0 || now.Before(f.first(uid, now).Add(pod.failFor))) {
		return true, fmt.Errorf("mock: %s of pod %s/%s failed, as annotation %s asks", c, namespace, name, AnnotationFailCalls)
	}
	if pod.failFor > 0 {
		f.first(uid, now) // the window counts from the first call, failing or not
	}
	if f.node.fail.has(c) && (f.node.failFor == 0 || now.Before(f.start.Add(f.node.failFor))) {
		if name == "" {
			return true, fmt.Errorf("mock: %s failed, as the provider config's faults ask", c)
		}
		return true, fmt.Errorf("mock: %s of pod %s/%s failed, as the provider config's faults ask", c, namespace, name)
	}
	if c == callDeletePod && pod.ignoreStop {
		return true, nil
	}
	return false, nil
}

// hangs says whether call c hangs, for how long (0: until the context is
// done), and whether the pod's annotation asks it (own); the pod's setting
// wins over the provider config's.
func (f *faults) hangs(c call, pod faultSpec) (hang bool, d time.Duration, own bool) {
	switch {
	case pod.hang.has(c):
		return true, pod.hangFor, true
	case f.node.hang.has(c):
		return true, f.node.hangFor, false
	}
	return false, 0, false
}

// hang makes call c wait d (see sleep). A hang the pod's annotation asks
// for (own) takes one of the node's maxHanging places; with none free the
// call runs at once, as if its hang had ended, and the pod gets a Warning
// Event naming the bound: an error instead would fail a call the pod did
// not ask to fail, and the controller's retries would spend the workers the
// bound keeps free.
func (f *faults) hang(ctx context.Context, c call, namespace, name string, uid types.UID, d time.Duration, own bool) error {
	if own {
		if !f.startHang() {
			f.events.warn(namespace, name, uid, ReasonHangRefused, fmt.Sprintf(
				"%s ran at once instead of hanging as annotation %s asks: node %s lets at most %d calls hang at a time (a quarter of its %d pod-sync workers, so the others serve its other pods)",
				c, AnnotationHangCalls, f.nodeName, f.maxHanging, f.workers))
			return nil
		}
		defer f.endHang()
	}
	return f.sleep(ctx, d)
}

// startHang takes a place for a hanging call, if one is free.
func (f *faults) startHang() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.hanging >= f.maxHanging {
		return false
	}
	f.hanging++
	return true
}

func (f *faults) endHang() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.hanging--
}

// first returns when the first call for uid was seen, recording now if none was.
func (f *faults) first(uid types.UID, now time.Time) time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	t, ok := f.firstCall[uid]
	if !ok {
		put(&f.firstCall, uid, now)
		t = now
	}
	return t
}

func (f *faults) forget(uid types.UID) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.firstCall, uid)
}

// sleep waits d (maxHang when d is 0), or until ctx is done, and returns
// ctx's error if it ended the wait.
func (f *faults) sleep(ctx context.Context, d time.Duration) error {
	if d == 0 {
		d = f.maxHang
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}
