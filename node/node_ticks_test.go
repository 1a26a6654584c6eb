package node

import (
	"sync"
	"testing"
	"time"
)

// TestTicksPostEachEventAtItsInterval: from one timer, each event comes at
// its own interval, events due together come as one post, and none comes
// after stop.
func TestTicksPostEachEventAtItsInterval(t *testing.T) {
	var mu sync.Mutex
	counts := map[event]int{}
	posts := 0
	stop := startTicks(func(e event) {
		mu.Lock()
		defer mu.Unlock()
		posts++
		for _, one := range []event{evPing, evRenew, evStatus} {
			if e&one != 0 {
				counts[one]++
			}
		}
	}, []tick{
		{e: evPing, interval: 10 * time.Millisecond},
		{e: evRenew, interval: 10 * time.Millisecond},
		{e: evStatus, interval: 80 * time.Millisecond},
	})
	time.Sleep(400 * time.Millisecond)
	stop()
	mu.Lock()
	got, calls := map[event]int{evPing: counts[evPing], evRenew: counts[evRenew], evStatus: counts[evStatus]}, posts
	mu.Unlock()
	if got[evPing] < 5 || got[evPing] > 40 {
		t.Errorf("%d pings in 400ms at 10ms; want 5 to 40", got[evPing])
	}
	if got[evRenew] != got[evPing] {
		t.Errorf("%d renewals and %d pings, due together; want as many", got[evRenew], got[evPing])
	}
	if calls > got[evPing]+got[evStatus] {
		t.Errorf("%d posts for %d pings, each due with a renewal, and %d status events; want at most one post a ping and a status event",
			calls, got[evPing], got[evStatus])
	}
	if got[evStatus] < 1 || got[evStatus] > got[evPing]/2 {
		t.Errorf("%d status events and %d pings; want at least one, and far fewer than pings", got[evStatus], got[evPing])
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if posts != calls {
		t.Errorf("%d posts after stop", posts-calls)
	}
}
