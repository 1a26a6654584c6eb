package node

import (
	"sync"
	"testing"

	"github.com/vkubelet/virtual-kubelet/node/internal/podlisting"
)

// A pod the provider has is never found lacking at its first look-up,
// however that look-up and the taking of the start listing interleave.
// TestReplicasShareNodes saw a pod the provider replayed recreated after a
// failover: the look-up had marked the key looked up, the listing then
// left it out as looked up, and the look-up found it lacking there.
func TestListedPodIsNeverFoundLacking(t *testing.T) {
	pod := testPod("uid-1", podRunning)
	key := podKey(pod)
	for i := range 3000 {
		var listing podlisting.Start
		records := newPodRecords()
		rec := records.get(key)
		sighted := func(k string) bool {
			r := records.lookup(k)
			return r != nil && r.view().sighted
		}
		start := make(chan struct{})
		var lacked bool
		var wg sync.WaitGroup
		wg.Go(func() { <-start; lacked = listing.LacksAtFirstLookUp(key, rec.lookedUp) })
		wg.Go(func() { <-start; listing.Taken([]string{key}, sighted) })
		close(start)
		wg.Wait()
		if lacked {
			t.Fatalf("try %d: the pod the provider listed was found lacking at its first look-up", i)
		}
	}
	// Looked up before the listing is taken: asked of the provider then,
	// and not again from the listing.
	var listing podlisting.Start
	rec := newPodRecords().get(key)
	if listing.LacksAtFirstLookUp(key, rec.lookedUp) {
		t.Error("a look-up before the listing found the pod lacking")
	}
	listing.Taken(nil, func(string) bool { return true })
	if listing.LacksAtFirstLookUp(key, rec.lookedUp) {
		t.Error("a second look-up consulted the listing")
	}
	// First looked up after a listing without it: lacking, once.
	other := newPodRecords().get(key)
	var empty podlisting.Start
	empty.Taken(nil, func(string) bool { return false })
	if !empty.LacksAtFirstLookUp(key, other.lookedUp) {
		t.Error("a pod missing from the listing was not found lacking at its first look-up")
	}
}
