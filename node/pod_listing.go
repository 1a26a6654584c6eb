package node

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// startListing is the keys of the pods the provider ran when the
// controller first listed them (the first resync's GetPods), less those
// looked up since. From then on the controller knows which pods the
// provider may have: those, and those it created itself. So the first
// look-up of a pod not among them needs no GetPod: one provider round trip
// saved per new pod (a remote call for a plugin or a remote cluster). A
// listed pod, and a key looked up before (a CreatePod that failed may have
// created the pod after all), are asked of the provider.
type startListing struct {
	mu sync.Mutex
	// keys is nil until the listing is taken.
	keys map[string]struct{}
}

// taken records the first listing, without the keys looked up already
// (sighted reports them: they were looked up while it was taken); later
// listings are ignored.
func (l *startListing) taken(pods []*corev1.Pod, sighted func(key string) bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.keys != nil {
		return
	}
	l.keys = make(map[string]struct{}, len(pods))
	for _, p := range pods {
		if p == nil {
			continue
		}
		if key := podKey(p); !sighted(key) {
			l.keys[key] = struct{}{}
		}
	}
}

// lacksAtFirstLookUp records a look-up of key (lookedUp, which reports
// whether it is the first) and reports whether it is the first and the
// listing shows the provider did not have key; false when it had it or
// before the listing was taken. The key leaves the listing: it is looked
// up once. Both happen under the listing's lock, as taken's check of what
// was looked up does: a key looked up between the two would be left out of
// the listing and then found lacking in it, though the provider had it.
func (l *startListing) lacksAtFirstLookUp(key string, lookedUp func() (first bool)) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !lookedUp() || l.keys == nil {
		return false
	}
	_, had := l.keys[key]
	delete(l.keys, key)
	return !had
}

// dropped removes a pod the provider no longer runs (an orphan the resync
// deleted).
func (l *startListing) dropped(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	delete(l.keys, key)
}
