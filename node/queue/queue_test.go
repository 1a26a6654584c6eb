package queue

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"

	"github.com/vkubelet/virtual-kubelet/test/poll"
)

func fastLimiter() workqueue.TypedRateLimiter[any] {
	return workqueue.NewTypedItemExponentialFailureRateLimiter[any](time.Millisecond, 10*time.Millisecond)
}

func TestRetriesUntilSuccess(t *testing.T) {
	var calls atomic.Int32
	done := make(chan struct{})
	q := New("test", fastLimiter(), nil, func(_ context.Context, key string) error {
		if calls.Add(1) < 3 {
			return errors.New("not yet")
		}
		close(done)
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx, 2)
	q.Enqueue("a")
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("key not retried to success")
	}
	if n := calls.Load(); n != 3 {
		t.Errorf("handler called %d times, want 3", n)
	}
}

func TestRetryPolicyGetsTriesAndCanGiveUp(t *testing.T) {
	var mu sync.Mutex
	var tries []int
	gaveUp := make(chan struct{})
	retry := func(_ context.Context, key string, timesTried int, added time.Time, err error) (*time.Duration, error) {
		mu.Lock()
		defer mu.Unlock()
		tries = append(tries, timesTried)
		if added.IsZero() || key != "k" {
			t.Errorf("retry policy got key %q added %v", key, added)
		}
		if timesTried == 3 {
			close(gaveUp)
			return nil, errors.New("enough")
		}
		d := time.Millisecond
		return &d, nil
	}
	q := New("test", fastLimiter(), retry, func(context.Context, string) error { return errors.New("fail") })
	var givenUp []string
	q.OnGiveUp(func(_ context.Context, key string) {
		mu.Lock()
		defer mu.Unlock()
		givenUp = append(givenUp, key)
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx, 1)
	q.Enqueue("k")
	select {
	case <-gaveUp:
	case <-time.After(5 * time.Second):
		t.Fatal("retry policy never gave up")
	}
	time.Sleep(50 * time.Millisecond)
	mu.Lock()
	defer mu.Unlock()
	if len(tries) != 3 || tries[0] != 1 || tries[2] != 3 {
		t.Errorf("tries = %v, want [1 2 3] and no more after giving up", tries)
	}
	if len(givenUp) != 1 || givenUp[0] != "k" {
		t.Errorf("OnGiveUp saw %v, want [k]", givenUp)
	}
}

func TestDefaultRetryFuncIsBounded(t *testing.T) {
	if _, err := DefaultRetryFunc(context.Background(), "k", MaxRetries-1, time.Now(), errors.New("x")); err != nil {
		t.Error("gave up too early")
	}
	if _, err := DefaultRetryFunc(context.Background(), "k", MaxRetries, time.Now(), errors.New("x")); err == nil {
		t.Error("never gives up")
	}
}

func TestRunDrainsWorkersOnCancel(t *testing.T) {
	started := make(chan struct{})
	release := make(chan struct{})
	var finished atomic.Bool
	q := New("test", nil, nil, func(context.Context, string) error {
		close(started)
		<-release
		finished.Store(true)
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() { q.Run(ctx, 1); close(returned) }()
	q.Enqueue("k")
	<-started
	cancel()
	select {
	case <-returned:
		t.Fatal("Run returned while a worker still held a key")
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	<-returned
	if !finished.Load() {
		t.Error("the in-flight key was not finished")
	}
}

func TestLengthsCountWaitingAndHandledKeys(t *testing.T) {
	release := make(chan struct{})
	started := make(chan struct{})
	q := New("test", fastLimiter(), nil, func(context.Context, string) error {
		started <- struct{}{}
		<-release
		return nil
	})
	q.Enqueue("a")
	q.Enqueue("b")
	if got := [3]int{q.Len(), q.UnprocessedLen(), q.ItemsBeingProcessedLen()}; got != [3]int{2, 2, 0} {
		t.Fatalf("before Run: Len, UnprocessedLen, ItemsBeingProcessedLen = %v, want [2 2 0]", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx, 1)
	<-started // one worker holds "a"; "b" waits
	if got := [3]int{q.Len(), q.UnprocessedLen(), q.ItemsBeingProcessedLen()}; got != [3]int{2, 1, 1} {
		t.Fatalf("while handling: Len, UnprocessedLen, ItemsBeingProcessedLen = %v, want [2 1 1]", got)
	}
	release <- struct{}{}
	<-started
	close(release)
	deadline := time.Now().Add(5 * time.Second)
	for q.Len() != 0 {
		if time.Now().After(deadline) {
			t.Fatalf("Len = %d after both keys were handled, want 0", q.Len())
		}
		time.Sleep(time.Millisecond)
	}
}

// A key added again with an earlier time is handled once, at the earlier
// time; every delayed add is counted as a retry, as client-go counts them.
func TestDelayedKeyKeepsItsEarlierTime(t *testing.T) {
	handled := make(chan time.Time, 4)
	m := newRecordedMetrics()
	q := New("delays", nil, nil, func(context.Context, string) error {
		handled <- time.Now()
		return nil
	}, WithMetrics(m))
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx, 1)
	start := time.Now()
	q.EnqueueAfter("k", 400*time.Millisecond)
	q.EnqueueAfter("k", 10*time.Millisecond)
	q.EnqueueAfter("k", time.Second) // later than the one waiting: no change
	select {
	case at := <-handled:
		if at.Sub(start) >= 400*time.Millisecond {
			t.Errorf("handled after %s: the earlier time did not replace the later", at.Sub(start))
		}
	case <-time.After(5 * time.Second):
		t.Fatal("delayed key never handled")
	}
	time.Sleep(1200 * time.Millisecond)
	if n := len(handled); n != 0 {
		t.Errorf("handled %d more times: a replaced wait still fired", n)
	}
	if n := m.value("delays", "retries"); n != 3 {
		t.Errorf("%v retries counted, want 3", n)
	}
}

// Shutting a queue down drops the keys waiting for their time.
func TestShutDownDropsWaitingKeys(t *testing.T) {
	var calls atomic.Int32
	q := New("test", nil, nil, func(context.Context, string) error {
		calls.Add(1)
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	returned := make(chan struct{})
	go func() { q.Run(ctx, 1); close(returned) }()
	q.EnqueueAfter("k", 50*time.Millisecond)
	cancel()
	<-returned
	time.Sleep(150 * time.Millisecond)
	if n := calls.Load(); n != 0 {
		t.Errorf("a key waiting at shutdown was handled %d times", n)
	}
	q.EnqueueAfter("late", time.Millisecond) // after shutdown: ignored, no panic
}

// A queue makes its work queue at its first key (or, with the fixed
// workers of vk_workqueue, at Start), not before; one shut down before any
// key ignores those that come later.
func TestWorkQueueMadeAtTheFirstKey(t *testing.T) {
	handled := make(chan string, 1)
	q := New("test", nil, nil, func(_ context.Context, key string) error {
		handled <- key
		return nil
	})
	q.Forget("k")
	if q.made.Load() != nil || q.Len() != 0 {
		t.Fatalf("a queue without keys made its work queue (length %d)", q.Len())
	}
	q.Enqueue("k")
	if q.made.Load() == nil {
		t.Fatal("the first key made no work queue")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.Start(ctx, 1)
	if got := <-handled; got != "k" {
		t.Fatalf("handled %q, want k", got)
	}

	var calls atomic.Int32
	idle := New("idle", nil, nil, func(context.Context, string) error {
		calls.Add(1)
		return nil
	})
	idleCtx, stop := context.WithCancel(context.Background())
	idle.Start(idleCtx, 1)
	stop()
	idle.Wait()
	idle.Enqueue("late")
	time.Sleep(50 * time.Millisecond)
	if n, l := calls.Load(), idle.Len(); n != 0 || l != 0 {
		t.Errorf("a key added after shutdown was handled %d times, length %d", n, l)
	}
}

// A busy queue runs at most its workers' keys at once.
func TestWorkersAreBounded(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var wg sync.WaitGroup
	var running, most atomic.Int32
	release := make(chan struct{})
	started := make(chan struct{}, 10)
	busy := New("busy", nil, nil, func(context.Context, string) error {
		n := running.Add(1)
		for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
		}
		started <- struct{}{}
		<-release
		running.Add(-1)
		return nil
	})
	wg.Go(func() { busy.Run(ctx, 3) })
	for _, k := range []string{"a", "b", "c", "d", "e", "f"} {
		busy.Enqueue(k)
	}
	for range 3 {
		<-started
	}
	time.Sleep(50 * time.Millisecond)
	if got := busy.ItemsBeingProcessedLen(); got != 3 {
		t.Errorf("%d keys handled at once with 3 workers", got)
	}
	close(release)
	for range 3 {
		<-started
	}
	if m := most.Load(); m != 3 {
		t.Errorf("at most %d keys ran at once, want 3", m)
	}
	cancel()
	wg.Wait()
}

// The queue reports client-go's work queue metrics with client-go's
// meaning: a key added twice while waiting is one add; depth counts waiting
// keys; unfinished work grows while a key is in hand and is zero after.
func TestMetrics(t *testing.T) {
	m := newRecordedMetrics()
	release := make(chan struct{})
	started := make(chan struct{}, 1)
	q := New("m", nil, nil, func(context.Context, string) error {
		started <- struct{}{}
		<-release
		return nil
	}, WithMetrics(m))
	q.Enqueue("a")
	q.Enqueue("a")
	q.Enqueue("b")
	if adds, depth := m.value("m", "adds"), m.value("m", "depth"); adds != 2 || depth != 2 {
		t.Fatalf("adds %v, depth %v before Start; want 2 and 2", adds, depth)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	q.Start(ctx, 1)
	<-started
	time.Sleep(3 * unfinishedUpdatePeriod)
	if depth, waited := m.value("m", "depth"), m.value("m", "latency"); depth != 1 || waited != 1 {
		t.Errorf("depth %v, queue durations observed %v while a is in hand; want 1 and 1", depth, waited)
	}
	if u, l := m.value("m", "unfinished"), m.value("m", "longest"); u < unfinishedUpdatePeriod.Seconds() || l < unfinishedUpdatePeriod.Seconds() {
		t.Errorf("unfinished work %vs, longest running %vs while a key was in hand for %s", u, l, 3*unfinishedUpdatePeriod)
	}
	release <- struct{}{}
	<-started
	release <- struct{}{}
	// The gauges may lag the last Done by one update, as client-go's do.
	poll.Until(t, 5*time.Second, "unfinished work and longest running 0 with nothing in hand", func() (bool, string) {
		u, l := m.value("m", "unfinished"), m.value("m", "longest")
		return u == 0 && l == 0, fmt.Sprintf("unfinished %v, longest %v", u, l)
	})
	cancel()
	q.Wait()
	if work, depth := m.value("m", "work"), m.value("m", "depth"); work != 2 || depth != 0 {
		t.Errorf("work durations observed %v, depth %v after both keys; want 2 and 0", work, depth)
	}
}

// recordedMetrics is a workqueue.MetricsProvider that keeps each metric's
// value (a histogram's: its count of observations).
type recordedMetrics struct {
	mu     sync.Mutex
	values map[[2]string]float64
}

func newRecordedMetrics() *recordedMetrics {
	return &recordedMetrics{values: map[[2]string]float64{}}
}

func (r *recordedMetrics) value(queue, metric string) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.values[[2]string{queue, metric}]
}

type recordedMetric struct {
	r   *recordedMetrics
	key [2]string
}

func (m recordedMetric) change(f func(float64) float64) {
	m.r.mu.Lock()
	defer m.r.mu.Unlock()
	m.r.values[m.key] = f(m.r.values[m.key])
}

func (m recordedMetric) Inc()              { m.change(func(v float64) float64 { return v + 1 }) }
func (m recordedMetric) Dec()              { m.change(func(v float64) float64 { return v - 1 }) }
func (m recordedMetric) Set(x float64)     { m.change(func(float64) float64 { return x }) }
func (m recordedMetric) Observe(_ float64) { m.Inc() }

func (r *recordedMetrics) metric(queue, name string) recordedMetric {
	return recordedMetric{r, [2]string{queue, name}}
}

func (r *recordedMetrics) NewDepthMetric(q string) workqueue.GaugeMetric { return r.metric(q, "depth") }
func (r *recordedMetrics) NewAddsMetric(q string) workqueue.CounterMetric {
	return r.metric(q, "adds")
}
func (r *recordedMetrics) NewLatencyMetric(q string) workqueue.HistogramMetric {
	return r.metric(q, "latency")
}
func (r *recordedMetrics) NewWorkDurationMetric(q string) workqueue.HistogramMetric {
	return r.metric(q, "work")
}
func (r *recordedMetrics) NewUnfinishedWorkSecondsMetric(q string) workqueue.SettableGaugeMetric {
	return r.metric(q, "unfinished")
}
func (r *recordedMetrics) NewLongestRunningProcessorSecondsMetric(q string) workqueue.SettableGaugeMetric {
	return r.metric(q, "longest")
}
func (r *recordedMetrics) NewRetriesMetric(q string) workqueue.CounterMetric {
	return r.metric(q, "retries")
}

// Keys waiting for different times are handled in the order of their
// times, none before it, whatever the order they were added in.
func TestDelayedKeysComeInTimeOrder(t *testing.T) {
	const n = 20
	type handling struct {
		key string
		at  time.Time
	}
	handled := make(chan handling, n)
	q := New("order", nil, nil, func(_ context.Context, key string) error {
		handled <- handling{key, time.Now()}
		return nil
	})
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go q.Run(ctx, 1)
	start := time.Now()
	delay := func(i int) time.Duration { return time.Duration(20+15*i) * time.Millisecond }
	for _, i := range rand.Perm(n) {
		q.EnqueueAfter(fmt.Sprint(i), delay(i))
	}
	for want := range n {
		select {
		case h := <-handled:
			if h.key != fmt.Sprint(want) {
				t.Fatalf("handled %s, want %d next", h.key, want)
			}
			if h.at.Sub(start) < delay(want) {
				t.Errorf("key %d handled after %s, before its %s", want, h.at.Sub(start), delay(want))
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("key %d never handled", want)
		}
	}
}

// A map that held few keys keeps its table for the next ones; one that held
// more than keepBelow lets it go once empty, and grows again on demand.
func TestKeyMapLetsGoOfLargeTables(t *testing.T) {
	var k keyMap[int]
	for i := range keepBelow {
		k.set(fmt.Sprint(i), i)
	}
	for i := range keepBelow {
		k.remove(fmt.Sprint(i))
	}
	if k.m == nil {
		t.Errorf("a map of at most %d keys was dropped when emptied, want it kept", keepBelow)
	}
	for i := range 10 * keepBelow {
		k.set(fmt.Sprint(i), i)
	}
	if v, ok := k.get("42"); !ok || v != 42 || k.len() != 10*keepBelow {
		t.Fatalf("get 42 = %d %v, len %d", v, ok, k.len())
	}
	for i := range 10 * keepBelow {
		k.remove(fmt.Sprint(i))
	}
	if k.m != nil || k.peak != 0 {
		t.Errorf("a map of %d keys emptied still holds its table (peak %d)", 10*keepBelow, k.peak)
	}
	k.set("again", 1)
	if v, ok := k.get("again"); !ok || v != 1 {
		t.Errorf("after letting its table go, get = %d %v", v, ok)
	}
}
