package queue

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// timerDelays is the delaying layer of a queue: each key waiting to be added
// is a runtime timer. client-go's own delaying queue keeps a goroutine, a
// thousand-slot channel and a heartbeat ticker per queue; a process of a
// thousand nodes has four thousand queues, nearly all of them idle.
type timerDelays struct {
	workqueue.TypedInterface[string]
	// retried is told of each delayed add, which client-go's delaying
	// queue counts as a retry.
	retried func()

	mu      sync.Mutex
	waiting map[string]*delayedKey
	stopped bool
}

// delayedKey is a key waiting for its time.
type delayedKey struct {
	at    time.Time
	timer *time.Timer
}

var _ workqueue.TypedDelayingInterface[string] = (*timerDelays)(nil)

func newTimerDelays(q workqueue.TypedInterface[string], retried func()) *timerDelays {
	return &timerDelays{TypedInterface: q, retried: retried, waiting: map[string]*delayedKey{}}
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
	if w, ok := d.waiting[key]; ok {
		if !at.Before(w.at) {
			return
		}
		w.timer.Stop()
	}
	w := &delayedKey{at: at}
	// fire takes mu, so it runs after w.timer is set.
	w.timer = time.AfterFunc(after, func() { d.fire(key, w) })
	d.waiting[key] = w
}

// fire adds key if w is still its wait (not replaced by an earlier one).
func (d *timerDelays) fire(key string, w *delayedKey) {
	d.mu.Lock()
	current := d.waiting[key] == w
	if current {
		delete(d.waiting, key)
	}
	d.mu.Unlock()
	if current {
		d.Add(key)
	}
}

// ShutDown drops the waiting keys and shuts the queue down.
func (d *timerDelays) ShutDown() {
	d.stopTimers()
	d.TypedInterface.ShutDown()
}

// ShutDownWithDrain drops the waiting keys and shuts the queue down once
// the keys being handled are done.
func (d *timerDelays) ShutDownWithDrain() {
	d.stopTimers()
	d.TypedInterface.ShutDownWithDrain()
}

func (d *timerDelays) stopTimers() {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.stopped = true
	for key, w := range d.waiting {
		w.timer.Stop()
		delete(d.waiting, key)
	}
}
