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
	running sync.WaitGroup
}

func (t *sessionTracker) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	t.running.Add(1)
	defer t.running.Done()
	t.Handler.ServeHTTP(w, r)
}

// wait returns when no request is running, or when ctx ends.
func (t *sessionTracker) wait(ctx context.Context) {
	done := make(chan struct{})
	go func() {
		t.running.Wait()
		close(done)
	}()
	select {
	case <-done:
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
