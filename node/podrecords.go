package node

import (
	"maps"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/internal/perpod"
)

// podRecord is what the controller remembers about one pod key between
// queue items, and the only place that state changes: the sync, status and
// delete queues each hold a key in one worker at a time, but share the
// record, so every transition takes its lock. Readers get a copy (view) and
// decide from that.
type podRecord struct {
	mu sync.Mutex
	st podState
}

// podState is one pod key's state at a moment. Its methods are the
// controller's decisions, pure functions of the state.
type podState struct {
	// applied is what we remember of the pod last handed to CreatePod or
	// UpdatePod, nil if the provider was never given it.
	applied   *appliedPod
	appliedAt time.Time
	// provider is the provider's latest view of the pod until its status
	// is written; then the informer holds it and this is dropped.
	provider *corev1.Pod
	// patched is the status and resource version our last status write
	// produced, until the informer catches up with it.
	patched *patchedStatus
	// last is the pod's final object, from the informer's delete event, to
	// tell the provider to delete a pod whose object vanished.
	last *corev1.Pod
	// providerDeleted is set once DeletePod succeeded or the provider did
	// not have the pod; deleteGrace is the grace period it was given, so a
	// shorter one is passed on.
	providerDeleted bool
	deleteGrace     int64
	deletedAt       time.Time
	// stopForced is set when the controller wrote a deleting pod's terminal
	// status because the provider did not confirm the stop in time.
	stopForced bool
	// creating is set while CreatePod runs, so the provider resync does not
	// take the pod being created for an orphan.
	creating bool
	// sighted is set once the controller looked the key up in the
	// provider (firstSight): from then on only the provider can say
	// whether it has the pod, not the listing of its pods at the start.
	sighted bool
	// objectDeleted is the UID of the pod whose object we deleted (grace
	// 0), so a stale informer does not make us delete it again.
	objectDeleted types.UID
	// waitingForConfig is set while a mandatory ConfigMap or Secret is missing.
	waitingForConfig bool
	// recreate is set when the provider lost the pod and its restart
	// policy has it created again: the next sync creates it rather than
	// report it lost.
	recreate bool
	// restarts are added to the restart counts the provider reports: the
	// restarts the controller made by creating the pod again, or those a
	// provider that adopted the pod does not count.
	restarts containerRestarts
	// alloc are the resources the provider is given for the containers
	// of the pod of UID allocOf, decided for its generation allocGen (the
	// generation acted on), and resize where its latest in-place resize
	// stands (see pod_resize.go).
	alloc    podAllocation
	allocOf  types.UID
	allocGen int64
	resize   resizeState
}

// appliedPod is what the controller keeps of a pod it handed to the
// provider: enough to tell whether a newer version changed, without keeping
// the whole object (a second copy of every pod) alive.
type appliedPod struct {
	uid         types.UID
	generation  int64
	labels      map[string]string
	annotations map[string]string
	// spec is kept only when the API server does not set generations.
	spec *corev1.PodSpec
}

func appliedOf(pod *corev1.Pod) appliedPod {
	a := appliedPod{uid: pod.UID, generation: pod.Generation, labels: pod.Labels, annotations: pod.Annotations}
	if pod.Generation == 0 {
		a.spec = &pod.Spec
	}
	return a
}

// changed reports whether the provider must be told about cur: its spec,
// labels or annotations differ from what the provider was given. The API
// server bumps metadata.generation on every spec change (Kubernetes 1.35+),
// which spares comparing specs on every status update; without it, the
// specs are compared.
func (a *appliedPod) changed(cur *corev1.Pod) bool {
	if a.generation > 0 && cur.Generation > 0 && a.uid == cur.UID {
		if a.generation != cur.Generation {
			return true
		}
	} else if a.spec == nil || !apiequality.Semantic.DeepEqual(*a.spec, cur.Spec) {
		return true
	}
	return !maps.Equal(a.labels, cur.Labels) || !maps.Equal(a.annotations, cur.Annotations)
}

// identity is a pod with only what names it, the form in which the
// controller keeps the provider's view of a pod and tells the provider to
// delete one whose object is gone.
func identity(namespace, name string, uid types.UID) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: uid}}
}

// withStatus is pod's identity with status.
func withStatus(pod *corev1.Pod, status corev1.PodStatus) *corev1.Pod {
	p := identity(pod.Namespace, pod.Name, pod.UID)
	p.Status = status
	return p
}

// patchedStatus is a status we wrote, at the resource version the API
// server gave it. It is the status we sent, not the API server's: a patch
// leaves what others wrote meanwhile, which the informer brings.
type patchedStatus struct {
	resourceVersion string
	status          corev1.PodStatus
}

// update runs one transition under the record's lock.
func (r *podRecord) update(f func(*podState)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	f(&r.st)
}

// view returns a copy of the state to decide from. The pointers it holds
// are never modified in place, only replaced, so the copy stays consistent.
func (r *podRecord) view() podState {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.st
}

// handedOver records that the provider was given pod (CreatePod or
// UpdatePod succeeded, or it already ran it).
func (r *podRecord) handedOver(pod *corev1.Pod) {
	a := appliedOf(pod)
	r.update(func(s *podState) {
		s.applied, s.appliedAt = &a, time.Now()
		s.providerDeleted, s.recreate = false, false
	})
}

// lostRestarting records that the provider lost the pod and it is to be
// created again, counting restarts on top of what the provider will report
// of its new run; the provider's view of the lost run is dropped.
func (r *podRecord) lostRestarting(restarts containerRestarts) {
	r.update(func(s *podState) {
		s.applied, s.provider = nil, nil
		s.recreate, s.restarts = true, restarts
	})
}

// allocated records the resources the provider is given for the pod of
// uid at generation.
func (r *podRecord) allocated(uid types.UID, alloc podAllocation, generation int64) {
	r.update(func(s *podState) {
		if s.allocOf != uid {
			s.resize = resizeState{}
		}
		s.alloc, s.allocOf, s.allocGen = alloc, uid, generation
	})
}

// resized records the provider's answer to the resize of the pod of uid to
// its generation: its allocation now, and where the resize stands.
func (r *podRecord) resized(uid types.UID, alloc podAllocation, result ResizeResult, generation int64) {
	r.update(func(s *podState) {
		if s.allocOf != uid {
			s.resize = resizeState{}
		}
		s.alloc, s.allocOf, s.allocGen, s.resize = alloc, uid, generation, s.resize.after(result, generation)
	})
}

// resizeWithdrawn records that the pod's spec is back to its allocation:
// a pending resize is no more.
func (r *podRecord) resizeWithdrawn(uid types.UID) {
	r.update(func(s *podState) {
		if s.allocOf == uid {
			s.resize.pending = nil
		}
	})
}

// resizeApplied records that the provider runs the pod of uid with the
// resources of its resize of generation in progress.
func (r *podRecord) resizeApplied(uid types.UID, generation int64) {
	r.update(func(s *podState) {
		if s.allocOf == uid && s.resize.inProgress == generation {
			s.resize.inProgress = 0
		}
	})
}

// resizeEnded records that the pod of uid finished: it has no resize.
func (r *podRecord) resizeEnded(uid types.UID) {
	r.update(func(s *podState) {
		if s.allocOf == uid {
			s.resize = resizeState{}
		}
	})
}

// restartsCounted records restarts the provider does not count (it adopted
// a pod with fewer restarts than the API server shows).
func (r *podRecord) restartsCounted(restarts containerRestarts) {
	r.update(func(s *podState) { s.restarts = restarts })
}

// replaced forgets a previous incarnation of the key (same name, other UID).
func (r *podRecord) replaced() {
	r.update(func(s *podState) {
		*s = podState{last: s.last, objectDeleted: s.objectDeleted, creating: s.creating, sighted: s.sighted}
	})
}

// lookedUp records that the provider is asked whether it has the pod, and
// reports whether this is the first time.
func (r *podRecord) lookedUp() (first bool) {
	r.update(func(s *podState) { first, s.sighted = !s.sighted, true })
	return first
}

// createStarted marks CreatePod as running; the returned func marks its end.
func (r *podRecord) createStarted() (ended func()) {
	r.update(func(s *podState) { s.creating = true })
	return func() { r.update(func(s *podState) { s.creating = false }) }
}

// configMissing and configured record whether the pod waits for a mandatory
// ConfigMap or Secret to appear.
func (r *podRecord) configMissing(missing bool) {
	r.update(func(s *podState) { s.waitingForConfig = missing })
}

// providerReported records the provider's latest view of the pod: its
// identity and a copy of its status (the provider may go on changing its
// object).
func (r *podRecord) providerReported(pod *corev1.Pod) {
	p := withStatus(pod, *pod.Status.DeepCopy())
	r.update(func(s *podState) { s.provider = p })
}

// probeChanged has the pod's status written again with new probe results:
// pp, the provider's latest view, is to be written, or the view waiting
// already, as a new object, so that a write of it under way does not count
// as this one (statusWritten drops only the very view it wrote).
func (r *podRecord) probeChanged(pp *corev1.Pod) {
	r.update(func(s *podState) {
		if s.provider != nil {
			pp = withStatus(s.provider, s.provider.Status)
		}
		s.provider = pp
	})
}

// stopForcedWith records the terminal status the controller decided for a
// pod the provider did not confirm stopped in time.
func (r *podRecord) stopForcedWith(pp *corev1.Pod) {
	r.update(func(s *podState) { s.provider, s.stopForced = pp, true })
}

// statusWritten records that the provider's view pp is in the API server:
// written, the status we wrote and the resource version the API server
// gave it (nil when nothing needed writing), is the freshest status until
// the informer catches up, and pp is dropped unless a newer view arrived
// meanwhile.
func (r *podRecord) statusWritten(pp *corev1.Pod, written *patchedStatus) {
	r.update(func(s *podState) {
		if written != nil {
			s.patched = written
		}
		if pp != nil && s.provider == pp {
			s.provider = nil
		}
	})
}

// informerSaw forgets our last write once the informer has caught up with
// it, so a steady pod keeps no copy of its status.
func (r *podRecord) informerSaw(resourceVersion string) {
	r.update(func(s *podState) {
		if s.patched != nil && !newerThan(s.patched.resourceVersion, resourceVersion) {
			s.patched = nil
		}
	})
}

// providerDeleted records that DeletePod succeeded with grace, or that the
// provider did not have the pod.
func (r *podRecord) providerDeleted(grace int64) {
	r.update(func(s *podState) { s.providerDeleted, s.deleteGrace, s.deletedAt = true, grace, time.Now() })
}

// objectDeleted records that we remove the pod object with uid; "" takes
// that back when the removal failed.
func (r *podRecord) objectDeleted(uid types.UID) {
	r.update(func(s *podState) { s.objectDeleted = uid })
}

// objectGone records the pod's final object, from the informer's delete event.
func (r *podRecord) objectGone(last *corev1.Pod) {
	r.update(func(s *podState) { s.last = last })
}

// freshestStatus returns the newest status we know the API server has for
// pod: the informer's, or our last write's while the informer has not seen
// it yet.
func (r *podRecord) freshestStatus(pod *corev1.Pod) *corev1.PodStatus {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.st.patched == nil {
		return &pod.Status
	}
	if newerThan(r.st.patched.resourceVersion, pod.ResourceVersion) {
		return &r.st.patched.status
	}
	r.st.patched = nil // the informer has caught up
	return &pod.Status
}

// newerThan reports whether resource version a is known to be newer than b.
func newerThan(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp > 0
}

// providerViewOf returns the provider's latest view unless it is of an
// earlier pod of the same name than uid.
func (s podState) providerViewOf(uid types.UID) *corev1.Pod {
	if s.provider != nil && s.provider.UID != "" && s.provider.UID != uid {
		return nil
	}
	return s.provider
}

// tellProvider decides whether a deleting pod's DeletePod call is due: the
// provider has not been told, or the grace period shrank (a second `kubectl
// delete` with a shorter one) for a pod still stopping. Our own final delete
// of a stopped pod reaches us as grace 0 too, which is no news.
func (s podState) tellProvider(grace int64, terminal bool) bool {
	return !s.providerDeleted || grace < s.deleteGrace && !terminal
}

// stopOnGone decides what the provider is told when the pod's object is
// gone: nothing (nil), or DeletePod with the pod it returns. A pod removed
// before the provider confirmed its stop (force deleted, or past its grace
// period) is stopped with grace 0, as the kubelet kills what is left of a
// pod whose object is gone. We remove an object only once its terminal
// status is written (or the stop was forced, flagged apart), so what we
// removed is stopped already, even when all we have is its identity.
func (s podState) stopOnGone(namespace, name string) *corev1.Pod {
	last := s.last
	if last == nil && s.applied != nil {
		// The store dropped the object before its delete event reached us.
		last = identity(namespace, name, s.applied.uid)
	}
	if last == nil {
		return nil
	}
	removedByUs := s.applied != nil && s.objectDeleted == s.applied.uid
	if s.providerDeleted && (s.deleteGrace <= 0 || !s.stopForced && (removedByUs || isTerminalStatus(&last.Status))) {
		return nil
	}
	last = last.DeepCopy()
	if s.providerDeleted {
		last.DeletionGracePeriodSeconds = ptr.To[int64](0)
	}
	return last
}

// mayBeOrphan reports whether a pod the provider has but Kubernetes does not
// may be deleted from the provider: not while we delete or create it.
func (s podState) mayBeOrphan() bool {
	return !s.providerDeleted && !s.creating
}

// mayBeLost reports whether a pod missing from a provider list taken at
// listed can be lost: the provider had it before the list was taken, or was
// told to delete it.
func (s podState) mayBeLost(deleting bool, listed time.Time) bool {
	if s.applied != nil && !s.appliedAt.After(listed) {
		return true
	}
	return deleting && s.providerDeleted
}

// podRecords maps "namespace/name" to its record.
type podRecords struct {
	mu sync.RWMutex
	m  map[string]*podRecord
}

func newPodRecords() *podRecords { return &podRecords{m: map[string]*podRecord{}} }

// get returns the record of key, creating it if needed.
func (p *podRecords) get(key string) *podRecord {
	if r := p.lookup(key); r != nil {
		return r
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	r, ok := p.m[key]
	if !ok {
		r = &podRecord{}
		p.m[key] = r
	}
	return r
}

// lookup returns the record of key, or nil.
func (p *podRecords) lookup(key string) *podRecord {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return p.m[key]
}

// PodEnded drops the record of a pod gone, and what the record of a
// replaced pod kept of the earlier one; a finished pod keeps its record
// while its object stays.
func (p *podRecords) PodEnded(key string, end perpod.End) {
	switch end {
	case perpod.Gone:
		p.mu.Lock()
		delete(p.m, key)
		p.mu.Unlock()
	case perpod.Replaced:
		if r := p.lookup(key); r != nil {
			r.replaced()
		}
	}
}

// Len is the number of records.
func (p *podRecords) Len() int {
	p.mu.RLock()
	defer p.mu.RUnlock()
	return len(p.m)
}

// waitingForConfig returns the keys in namespace waiting for a ConfigMap or Secret.
func (p *podRecords) waitingForConfig(namespace string) []string {
	prefix := namespace + "/"
	p.mu.RLock()
	defer p.mu.RUnlock()
	var keys []string
	for key, r := range p.m {
		if strings.HasPrefix(key, prefix) && r.view().waitingForConfig {
			keys = append(keys, key)
		}
	}
	return keys
}
