// Package podlisting keeps the keys of the pods a provider ran when the pod
// controller first listed them (its first resync's GetPods), less those
// looked up since. From then on the controller knows which pods the
// provider may have: those, and those it created itself. So the first
// look-up of a pod not among them needs no GetPod: one provider round trip
// saved per new pod (a remote call for a plugin or a remote cluster). A
// listed pod, and a key looked up before (a CreatePod that failed may have
// created the pod after all), are asked of the provider.
package podlisting

import (
	"sync"

	"github.com/vkubelet/virtual-kubelet/node/internal/perpod"
)

// Start is the provider's pods at the start; the zero value is a listing
// not taken yet. It is safe for concurrent use.
type Start struct {
	mu sync.Mutex
	// keys is nil until the listing is taken.
	keys map[string]struct{}
}

// Taken records the first listing, the keys of the provider's pods,
// without the keys looked up already (sighted reports them: they were
// looked up while it was taken); later listings are ignored.
func (l *Start) Taken(keys []string, sighted func(key string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys != nil {
		return
	}
	l.keys = make(map[string]struct{}, len(keys))
	for _, key := range keys {
		if !sighted(key) {
			l.keys[key] = struct{}{}
		}
	}
}

// LacksAtFirstLookUp records a look-up of key (lookedUp, which reports
// whether it is the first) and reports whether it is the first and the
// listing shows the provider did not have key; false when it had it or
// before the listing was taken. The key leaves the listing: it is looked
// up once. Both happen under the listing's lock, as Taken's check of what
// was looked up does: a key looked up between the two would be left out of
// the listing and then found lacking in it, though the provider had it.
func (l *Start) LacksAtFirstLookUp(key string, lookedUp func() (first bool)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !lookedUp() || l.keys == nil {
		return false
	}
	_, had := l.keys[key]
	delete(l.keys, key)
	return !had
}

// Dropped removes a pod the provider no longer runs (an orphan the resync
// deleted).
func (l *Start) Dropped(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.keys, key)
}

// PodEnded drops a pod replaced or gone: it is never looked up as listed.
func (l *Start) PodEnded(key string, end perpod.End) {
	if end != perpod.Finished {
		l.Dropped(key)
	}
}

// Len is the number of listed keys not looked up yet.
func (l *Start) Len() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.keys)
}
