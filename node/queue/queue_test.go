package queue

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/client-go/util/workqueue"
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
