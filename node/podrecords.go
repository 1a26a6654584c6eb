package node

import (
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
)

// podRecord is what the controller remembers about one pod key between
// queue items. The queues guarantee a key is handled by one worker per queue
// at a time, but the three queues share the record, hence the lock.
type podRecord struct {
	mu sync.Mutex
	// applied is the Kubernetes pod last handed to CreatePod or UpdatePod
	// (before env resolution), nil if the provider was never given it.
	applied   *corev1.Pod
	appliedAt time.Time
	// provider is the provider's latest view of the pod.
	provider *corev1.Pod
	// patched is the status and resource version our last status write
	// produced, until the informer catches up with it.
	patched *patchedStatus
	// last is the latest Kubernetes object seen, to tell the provider to
	// delete a pod whose object vanished.
	last *corev1.Pod
	// providerDeleted is set once DeletePod succeeded or the provider did
	// not have the pod.
	providerDeleted bool
	// objectDeleted is the UID of the pod whose object we deleted (grace
	// 0), so a stale informer does not make us delete it again.
	objectDeleted types.UID
	// waitingForConfig is set while a mandatory ConfigMap or Secret is missing.
	waitingForConfig bool
}

type patchedStatus struct {
	resourceVersion string
	status          corev1.PodStatus
}

func (r *podRecord) lock() func() {
	r.mu.Lock()
	return r.mu.Unlock
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

func (r *podRecord) providerPod() *corev1.Pod {
	defer r.lock()()
	return r.provider
}

func (r *podRecord) appliedPod() (*corev1.Pod, time.Time) {
	defer r.lock()()
	return r.applied, r.appliedAt
}

func (r *podRecord) setApplied(pod *corev1.Pod) {
	defer r.lock()()
	r.applied, r.appliedAt = pod, time.Now()
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

func (r *podRecord) setProviderDeleted() {
	defer r.lock()()
	r.providerDeleted = true
}

func (r *podRecord) isProviderDeleted() bool {
	defer r.lock()()
	return r.providerDeleted
}

func (r *podRecord) setWaitingForConfig(v bool) {
	defer r.lock()()
	r.waitingForConfig = v
}

// reset forgets a previous incarnation of the key (same name, other UID).
func (r *podRecord) reset() {
	defer r.lock()()
	r.applied, r.provider, r.patched, r.providerDeleted, r.waitingForConfig = nil, nil, nil, false, false
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
