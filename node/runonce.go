package node

import (
	"fmt"
	"sync"
)

// runOnce is a controller's Run lifecycle: Run may be called once; done is
// closed when it returns, and err is what it returned.
type runOnce struct {
	mu      sync.Mutex
	started bool
	done    chan struct{}
	err     error
	// after are afterFinish's funcs, until done is closed.
	after []func()
}

func newRunOnce() *runOnce { return &runOnce{done: make(chan struct{})} }

// start marks Run as called, or fails for a second call; what names the
// controller.
func (r *runOnce) start(what string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return fmt.Errorf("%s: Run was already called", what)
	}
	r.started = true
	return nil
}

// finish records what Run returned, closes done and runs afterFinish's
// funcs.
func (r *runOnce) finish(err error) {
	r.mu.Lock()
	r.err = err
	close(r.done)
	after := r.after
	r.after = nil
	r.mu.Unlock()
	for _, f := range after {
		go f()
	}
}

// afterFinish runs f on a goroutine of its own once done is closed, or at
// once if it is.
func (r *runOnce) afterFinish(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		go f()
	default:
		r.after = append(r.after, f)
	}
}

// result is what Run returned, nil while it runs.
func (r *runOnce) result() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
