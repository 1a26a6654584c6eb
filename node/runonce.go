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

// finish records what Run returned and closes done.
func (r *runOnce) finish(err error) {
	r.mu.Lock()
	r.err = err
	r.mu.Unlock()
	close(r.done)
}

// result is what Run returned, nil while it runs.
func (r *runOnce) result() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
