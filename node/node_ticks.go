package node

import (
	"sync"
	"time"
)

// ticks posts the control loop's periodic events from one timer: each
// event every its interval after the last, the timer set for whichever is
// due first. One timer rather than one per event: a process of a thousand
// idle nodes holds little else per node.
type ticks struct {
	post    func(event)
	mu      sync.Mutex
	timer   *time.Timer
	stopped bool
	due     []tick
}

// tick is one periodic event and when it is next due.
type tick struct {
	e        event
	interval time.Duration
	next     time.Time
}

// startTicks posts each of ts's events every its interval, the first an
// interval from now, until stop is called.
func startTicks(post func(event), ts []tick) (stop func()) {
	t := &ticks{post: post, due: ts}
	now := time.Now()
	for i := range t.due {
		t.due[i].next = now.Add(t.due[i].interval)
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	t.timer = time.AfterFunc(t.wait(now), t.fire)
	return t.stop
}

// fire posts the events that are due and sets the timer for the next.
func (t *ticks) fire() {
	t.mu.Lock()
	if t.stopped {
		t.mu.Unlock()
		return
	}
	now := time.Now()
	var due event
	for i := range t.due {
		if d := &t.due[i]; !now.Before(d.next) {
			due |= d.e
			d.next = now.Add(d.interval)
		}
	}
	t.timer.Reset(t.wait(now))
	t.mu.Unlock()
	if due != 0 {
		t.post(due)
	}
}

// wait is how long from now the first event is due.
func (t *ticks) wait(now time.Time) time.Duration {
	next := t.due[0].next
	for _, d := range t.due[1:] {
		if d.next.Before(next) {
			next = d.next
		}
	}
	return next.Sub(now)
}

// stop ends the ticks; an event posted as it is called is dropped by the
// stopped loop.
func (t *ticks) stop() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.stopped = true
	t.timer.Stop()
}
