package mock

import "time"

// clock gives pods the time and their timers: the real one, or a replay's
// while a pod restored from the state directory catches up with the time
// the daemon was down.
type clock interface {
	Now() time.Time
	AfterFunc(d time.Duration, f func()) stoppable
}

// stoppable is a timer that can be stopped, as *time.Timer.
type stoppable interface{ Stop() bool }

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) stoppable { return time.AfterFunc(d, f) }

// replayClock runs timers in virtual time, at once and in order, so a pod
// lives through in a moment what it would have lived through while the
// daemon was down. It is not safe for concurrent use: a pod is replayed
// before the provider is shared.
type replayClock struct {
	now     time.Time
	pending []*replayTimer
}

// replayTimer is a timer of a replayClock; after handOver, a real one.
type replayTimer struct {
	at      time.Time
	f       func()
	stopped bool
	real    *time.Timer
}

func (c *replayClock) Now() time.Time { return c.now }

func (c *replayClock) AfterFunc(d time.Duration, f func()) stoppable {
	t := &replayTimer{at: c.now.Add(d), f: f}
	c.pending = append(c.pending, t)
	return t
}

// Stop stops the timer; it reports whether it was pending.
func (t *replayTimer) Stop() bool {
	if t.real != nil {
		return t.real.Stop()
	}
	was := !t.stopped
	t.stopped = true
	return was
}

// runUntil fires, in the order of their times (then of their setting), the
// timers due by end, including those they set, and leaves the clock at end.
func (c *replayClock) runUntil(end time.Time) {
	for {
		next := -1
		for i, t := range c.pending {
			if !t.stopped && !t.at.After(end) && (next < 0 || t.at.Before(c.pending[next].at)) {
				next = i
			}
		}
		if next < 0 {
			break
		}
		t := c.pending[next]
		c.pending = append(c.pending[:next], c.pending[next+1:]...)
		t.stopped = true
		if t.at.After(c.now) {
			c.now = t.at
		}
		t.f()
	}
	if end.After(c.now) {
		c.now = end
	}
}

// handOver turns the timers still pending into real ones, due at their
// times as seen from now.
func (c *replayClock) handOver(now time.Time) {
	for _, t := range c.pending {
		if !t.stopped {
			t.real = time.AfterFunc(t.at.Sub(now), t.f)
		}
	}
	c.pending = nil
}
