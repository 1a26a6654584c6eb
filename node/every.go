package node

import (
	"context"
	"math/rand/v2"
	"sync"
	"time"
)

// every calls f at once and then interval after each call returns, until
// ctx ends, as wait.UntilWithContext does, but on a runtime timer: between
// calls it holds no goroutine, which matters for a process
// running a thousand nodes. A jitter above 0 moves each later wait by up to
// that fraction of the interval either way, so that the nodes of a process
// started together do not all make their calls at the same moment. The
// returned wait blocks until ctx has ended and no call is running; it does
// not wait out the interval.
func every(ctx context.Context, interval time.Duration, jitter float64, f func(context.Context)) (wait func()) {
	var (
		mu    sync.Mutex
		calls sync.WaitGroup // one per call scheduled or running
		timer *time.Timer
	)
	tick := func() {
		defer calls.Done()
		if ctx.Err() != nil {
			return
		}
		f(ctx)
		mu.Lock()
		defer mu.Unlock()
		if ctx.Err() == nil {
			calls.Add(1)
			timer.Reset(jittered(interval, jitter))
		}
	}
	mu.Lock()
	calls.Add(1)
	timer = time.AfterFunc(0, tick)
	mu.Unlock()
	return func() {
		<-ctx.Done()
		// A call waiting for its time is not made: the timer is stopped
		// here rather than left to fire after ctx ended.
		mu.Lock()
		if timer.Stop() {
			calls.Done()
		}
		mu.Unlock()
		calls.Wait()
	}
}

// jittered is interval moved by up to jitter times it, either way, at random.
func jittered(interval time.Duration, jitter float64) time.Duration {
	if jitter <= 0 {
		return interval
	}
	return interval + time.Duration((2*rand.Float64()-1)*jitter*float64(interval)) //nolint:gosec // G404: jitter, not a secret
}
