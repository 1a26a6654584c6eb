//go:build !vk_workqueue

package queue

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// An idle queue costs no goroutine whatever its workers.
func TestWorkersStartOnDemand(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := runtime.NumGoroutine()
	const queues = 20
	var wg sync.WaitGroup
	for range queues {
		q := New("idle", nil, nil, func(context.Context, string) error { return nil }, WithMetrics(newRecordedMetrics()))
		q.Start(ctx, 8)
		wg.Go(func() { <-ctx.Done(); q.Wait() })
		q.Enqueue("once") // a worker comes and goes
	}
	time.Sleep(100 * time.Millisecond)
	// The waiters above are the test's own: one per queue.
	if extra := runtime.NumGoroutine() - before - queues; extra > 2 {
		t.Errorf("%d idle queues of 8 workers use %d goroutines, want none", queues, extra)
	}
	cancel()
	wg.Wait()
}

// After a burst the queue's key maps let their tables go: a process of a
// thousand nodes must not keep, in each of its queues, tables sized for the
// largest burst it saw. Every key fails once, so the retry state and the
// delays hold it too.
func TestBurstLeavesNoTables(t *testing.T) {
	const n = 1000
	var failed sync.Map
	q := New("burst", fastLimiter(), nil, func(_ context.Context, key string) error {
		if _, again := failed.LoadOrStore(key, true); !again {
			return errors.New("once more")
		}
		return nil
	}, WithMetrics(newRecordedMetrics()))
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	for i := range n {
		q.Enqueue(fmt.Sprint(i))
	}
	q.Start(ctx, 8)
	// The tables left: keys still in them, and the most keys each held
	// since it was made (a table of at most keepBelow is kept for reuse).
	left := func() string {
		q.mu.Lock()
		items := fmt.Sprintf("items %d (peak %d)", q.items.len(), q.items.peak)
		big := q.items.len() > 0 || q.items.peak > keepBelow
		q.mu.Unlock()
		m := q.pool.metrics
		m.mu.Lock()
		defer m.mu.Unlock()
		big = big || m.waiting.len() > 0 || m.waiting.peak > keepBelow || m.handling.len() > 0 || m.handling.peak > keepBelow
		if !big {
			return ""
		}
		return fmt.Sprintf("%s, waiting %d (peak %d), in hand %d (peak %d)", items, m.waiting.len(), m.waiting.peak, m.handling.len(), m.handling.peak)
	}
	poll.Until(t, 10*time.Second, fmt.Sprintf("every table empty and sized for at most %d keys after %d keys, each handled twice", keepBelow, n), func() (bool, string) {
		l := left()
		return l == "", l
	})
}
