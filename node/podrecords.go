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
)

// podRecord is what the controller remembers about one pod key between
// queue items. The queues guarantee a key is handled by one worker per queue
// at a time, but the three queues share the record, hence the lock.
type podRecord struct {
	mu sync.Mutex
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
	// objectDeleted is the UID of the pod whose object we deleted (grace
	// 0), so a stale informer does not make us delete it again.
	objectDeleted types.UID
	// waitingForConfig is set while a mandatory ConfigMap or Secret is missing.
	waitingForConfig bool
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

// stub is a pod with just the identity of the applied one, to tell the
// provider to delete it when its object is gone.
func (a *appliedPod) stub(namespace, name string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: namespace, Name: name, UID: a.uid}}
}

type patchedStatus struct {
	resourceVersion string
	status          corev1.PodStatus
}

func (r *podRecord) lock() func() {
	r.mu.Lock()
	return r.mu.Unlock
}

// informerSaw forgets our last write once the informer has caught up with
// it, so a steady pod keeps no copy of its status.
func (r *podRecord) informerSaw(resourceVersion string) {
	defer r.lock()()
	if r.patched == nil {
		return
	}
	if cmp, err := resourceversion.CompareResourceVersion(r.patched.resourceVersion, resourceVersion); err != nil || cmp <= 0 {
		r.patched = nil
	}
}

func (r *podRecord) lastSeen(pod *corev1.Pod) {
	defer r.lock()()
	r.last = pod
}

func (r *podRecord) lastPod() *corev1.Pod {
	defer r.lock()()
	return r.last
}

func (r *podRecord) setProviderPod(pod *corev1.Pod) {
	defer r.lock()()
	r.provider = pod
}

// written drops the provider's view once its status is in the API server,
// unless a newer one arrived meanwhile.
func (r *podRecord) written(pod *corev1.Pod) {
	defer r.lock()()
	if r.provider == pod {
		r.provider = nil
	}
}

func (r *podRecord) providerPod() *corev1.Pod {
	defer r.lock()()
	return r.provider
}

func (r *podRecord) appliedPod() (*appliedPod, time.Time) {
	defer r.lock()()
	return r.applied, r.appliedAt
}

func (r *podRecord) setApplied(pod *corev1.Pod) {
	a := appliedOf(pod)
	defer r.lock()()
	r.applied, r.appliedAt = &a, time.Now()
	r.providerDeleted = false
}

func (r *podRecord) setObjectDeleted(uid types.UID) {
	defer r.lock()()
	r.objectDeleted = uid
}

func (r *podRecord) isObjectDeleted(uid types.UID) bool {
	defer r.lock()()
	return r.objectDeleted == uid
}

func (r *podRecord) setProviderDeleted(grace int64) {
	defer r.lock()()
	r.providerDeleted, r.deleteGrace, r.deletedAt = true, grace, time.Now()
}

func (r *podRecord) isProviderDeleted() bool {
	defer r.lock()()
	return r.providerDeleted
}

// providerDeletedWith returns the grace period DeletePod was given, and
// whether it was called (and succeeded) at all.
func (r *podRecord) providerDeletedWith() (int64, bool) {
	defer r.lock()()
	return r.deleteGrace, r.providerDeleted
}

// providerDeletedAt is when DeletePod last succeeded; zero if it has not.
func (r *podRecord) providerDeletedAt() time.Time {
	defer r.lock()()
	return r.deletedAt
}

func (r *podRecord) setStopForced() {
	defer r.lock()()
	r.stopForced = true
}

func (r *podRecord) wasStopForced() bool {
	defer r.lock()()
	return r.stopForced
}

func (r *podRecord) setCreating(v bool) {
	defer r.lock()()
	r.creating = v
}

func (r *podRecord) isCreating() bool {
	defer r.lock()()
	return r.creating
}

func (r *podRecord) setWaitingForConfig(v bool) {
	defer r.lock()()
	r.waitingForConfig = v
}

// reset forgets a previous incarnation of the key (same name, other UID).
func (r *podRecord) reset() {
	defer r.lock()()
	r.applied, r.provider, r.patched, r.waitingForConfig = nil, nil, nil, false
	r.providerDeleted, r.deleteGrace, r.deletedAt, r.stopForced = false, 0, time.Time{}, false
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

func (p *podRecords) remove(key string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.m, key)
}

// waitingForConfig returns the keys in namespace waiting for a ConfigMap or Secret.
func (p *podRecords) waitingForConfig(namespace string) []string {
	prefix := namespace + "/"
	p.mu.RLock()
	defer p.mu.RUnlock()
	var keys []string
	for key, r := range p.m {
		if !strings.HasPrefix(key, prefix) {
			continue
		}
		r.mu.Lock()
		if r.waitingForConfig {
			keys = append(keys, key)
		}
		r.mu.Unlock()
	}
	return keys
}
