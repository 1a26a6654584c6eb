package commands

import (
	"context"
	"errors"
	"net"
	"net/http"
	"sync"
)

// errShuttingDown ends the requests still running when a server shuts
// down; a streaming session reports it to its client as its final status.
var errShuttingDown = errors.New("the node is shutting down")

// sessionTracker counts the requests srv's handler is running. Shutdown
// waits for connections net/http still owns, but exec, attach and
// port-forward sessions hijack theirs: without this, shutdown returned at
// once and the process exited under them, and clients (kubectl) saw the
// connection drop without a close frame or a status (WebSocket close
// 1006, "unexpected EOF").
type sessionTracker struct {
	http.Handler

	// A count rather than a sync.WaitGroup: requests keep arriving while
	// shutdown waits (new streams on an HTTP/2 connection it has not
	// closed yet), and a WaitGroup's Add from zero must not race its Wait.
	mu      sync.Mutex
	running int
	// idle, once a wait has made it, is closed when running drops to 0.
	idle chan struct{}
}

func (t *sessionTracker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.mu.Lock()
	t.running++
	t.mu.Unlock()
	defer t.finished()
	t.Handler.ServeHTTP(w, r)
}

func (t *sessionTracker) finished() {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.running--
	if t.running == 0 && t.idle != nil {
		close(t.idle)
		t.idle = nil
	}
}

// wait returns when no request is running, or when ctx ends.
func (t *sessionTracker) wait(ctx context.Context) {
	t.mu.Lock()
	if t.running == 0 {
		t.mu.Unlock()
		return
	}
	if t.idle == nil {
		t.idle = make(chan struct{})
	}
	idle := t.idle
	t.mu.Unlock()
	select {
	case <-idle:
	case <-ctx.Done():
	}
}

// trackSessions makes srv's requests end, with errShuttingDown as their
// context's cause, when srv shuts down, and counts them so that shutdown
// can wait for them (see shutdownServer).
func trackSessions(srv *http.Server) {
	base, end := context.WithCancelCause(context.Background())
	srv.BaseContext = func(net.Listener) context.Context { return base }
	srv.RegisterOnShutdown(func() { end(errShuttingDown) })
	h := srv.Handler
	if h == nil {
		h = http.DefaultServeMux
	}
	srv.Handler = &sessionTracker{Handler: h}
}
