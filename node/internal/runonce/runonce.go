// Package runonce is the lifecycle of something that runs once and then
// stops: the node and pod controllers, and nodeutil's Node. Done is
// closed when it has stopped, Result says why, and funcs given to
// AfterFinish run then, each on a goroutine of its own, so that a process
// following many of them need not keep a goroutine waiting on each.
package runonce

import (
	"fmt"
	"sync"
)

// Once is one run: it may be started once and is finished once.
type Once struct {
	mu      sync.Mutex
	started bool
	done    chan struct{}
	err     error
	// after are AfterFinish's funcs, until done is closed.
	after []func()
}

// New returns a run not yet started.
func New() *Once { return &Once{done: make(chan struct{})} }

// Start marks the run as started, or fails for a second call; what names
// the one that runs.
func (r *Once) Start(what string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.started {
		return fmt.Errorf("%s: Run was already called", what)
	}
	r.started = true
	return nil
}

// Finish records why the run ended, closes Done and runs AfterFinish's
// funcs. It is called once.
func (r *Once) Finish(err error) {
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

// AfterFinish runs f on a goroutine of its own once the run has finished,
// or at once if it has.
func (r *Once) AfterFinish(f func()) {
	r.mu.Lock()
	defer r.mu.Unlock()
	select {
	case <-r.done:
		go f()
	default:
		r.after = append(r.after, f)
	}
}

// Done is closed once the run has finished.
func (r *Once) Done() <-chan struct{} { return r.done }

// Result is why the run ended, nil while it runs.
func (r *Once) Result() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.err
}
