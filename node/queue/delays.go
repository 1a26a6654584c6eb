//go:build !vk_workqueue

package queue

import (
	"container/heap"
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// timerDelays is the delaying layer of a queue: the keys waiting to be added
// are a heap by time, and one runtime timer is armed for the earliest.
// client-go's own delaying queue keeps a goroutine, a thousand-slot channel
// and a heartbeat ticker per queue; a process of a thousand nodes has four
// thousand queues, nearly all of them idle. And a node of ten thousand pods
// has ten thousand keys waiting for their tokens' refresh: a timer each
// would be five times the memory of a heap entry.
type timerDelays struct {
	workqueue.TypedInterface[string]
	// retried is told of each delayed add, which client-go's delaying
	// queue counts as a retry.
	retried func()

	mu      sync.Mutex
	waiting keyMap[*delayedKey]
	order   waits
	// timer is armed for order's earliest; nil until the first wait.
	timer   *time.Timer
	stopped bool
}

// delayedKey is a key waiting for its time.
type delayedKey struct {
	key   string
	at    time.Time
	index int // in the heap
}

var _ workqueue.TypedDelayingInterface[string] = (*timerDelays)(nil)

func newTimerDelays(q workqueue.TypedInterface[string], retried func()) *timerDelays {
	return &timerDelays{TypedInterface: q, retried: retried}
}

// AddAfter adds key once after has passed. A key already waiting keeps the
// earlier of its two times, as in client-go's delaying queue.
func (d *timerDelays) AddAfter(key string, after time.Duration) {
	if d.ShuttingDown() {
		return
	}
	d.retried()
	if after <= 0 {
		d.Add(key)
		return
	}
	at := time.Now().Add(after)
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.stopped {
		return
	}
	w, ok := d.waiting.get(key)
	switch {
	case !ok:
		w = &delayedKey{key: key, at: at}
		heap.Push(&d.order, w)
		d.waiting.set(key, w)
	case at.Before(w.at):
		w.at = at
		heap.Fix(&d.order, w.index)
	default:
		return
	}
	if w.index == 0 {
		d.arm()
	}
}

// arm sets the timer for the earliest wait. mu is held.
func (d *timerDelays) arm() {
	if len(d.order) == 0 {
		return
	}
	next := time.Until(d.order[0].at)
	if d.timer == nil {
		d.timer = time.AfterFunc(next, d.fire)
		return
	}
	d.timer.Reset(next)
}

// fire adds the keys whose time has come and arms the timer for the next.
// A fire that finds none due (the timer was reset for an earlier key as it
// fired) only arms it again.
func (d *timerDelays) fire() {
	d.mu.Lock()
	var due []string
	now := time.Now()
	for len(d.order) > 0 && !d.order[0].at.After(now) {
		w := heap.Pop(&d.order).(*delayedKey)
		d.waiting.remove(w.key)
		due = append(due, w.key)
	}
	if !d.stopped {
		d.arm()
	}
	d.mu.Unlock()
	for _, key := range due {
		d.Add(key)
	}
}

// ShutDown drops the waiting keys and shuts the queue down.
func (d *timerDelays) ShutDown() {
	d.stopTimer()
	d.TypedInterface.ShutDown()
}

// ShutDownWithDrain drops the waiting keys and shuts the queue down once
// the keys being handled are done.
func (d *timerDelays) ShutDownWithDrain() {
	d.stopTimer()
	d.TypedInterface.ShutDownWithDrain()
}

func (d *timerDelays) stopTimer() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	if d.timer != nil {
		d.timer.Stop()
	}
	d.waiting.clear()
	d.order = nil
}

// waits is a heap of delayed keys, earliest first (container/heap).
type waits []*delayedKey

func (h waits) Len() int           { return len(h) }
func (h waits) Less(i, j int) bool { return h[i].at.Before(h[j].at) }
func (h waits) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}

func (h *waits) Push(x any) {
	w := x.(*delayedKey)
	w.index = len(*h)
	*h = append(*h, w)
}

func (h *waits) Pop() any {
	old := *h
	w := old[len(old)-1]
	old[len(old)-1] = nil
	*h = old[:len(old)-1]
	return w
}
