package commands

import (
	"context"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

// TestShutdownEndsSessionsWithStatus: an exec session running when the
// daemon shuts down ends with a status naming the shutdown, over a
// connection closed cleanly; shutdown returns after the session has ended.
// Before, shutdown returned at once and the process exited under the
// hijacked connection: kubectl got "websocket: close 1006 (abnormal
// closure): unexpected EOF".
func TestShutdownEndsSessionsWithStatus(t *testing.T) {
	started, ended := make(chan struct{}), make(chan struct{})
	handler := api.PodHandler(api.PodHandlerConfig{
		RunInContainer: func(ctx context.Context, _, _, _ string, _ []string, _ api.AttachIO) error {
			close(started)
			<-ctx.Done()
			// A provider's stream to its backend is slower to end than
			// the context; shutdown must wait for it.
			time.Sleep(200 * time.Millisecond)
			defer close(ended)
			return ctx.Err()
		},
	}, true)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &servers{errs: make(chan error, 1)}
	s.serve(context.Background(), "kubelet API", &http.Server{Handler: handler, ReadHeaderTimeout: time.Minute}, l, false)

	u := &url.URL{Scheme: "http", Host: l.Addr().String(), Path: "/exec/ns/web/app",
		RawQuery: url.Values{"command": {"sleep", "3600"}, "output": {"1"}}.Encode()}
	e, err := remotecommand.NewWebSocketExecutor(&rest.Config{Host: "http://" + l.Addr().String()}, http.MethodGet, u.String())
	if err != nil {
		t.Fatal(err)
	}
	session := make(chan error, 1)
	go func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		session <- e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &strings.Builder{}})
	}()
	select {
	case <-started:
	case err := <-session:
		t.Fatalf("the session ended before it started: %v", err)
	}

	s.shutdown(10 * time.Second)
	select {
	case <-ended:
	default:
		t.Error("shutdown returned before the session ended")
	}
	select {
	case err := <-session:
		if err == nil || !strings.Contains(err.Error(), errShuttingDown.Error()) {
			t.Errorf("the client's session ended with %v, want a status saying %q", err, errShuttingDown)
		}
		if err != nil && (strings.Contains(err.Error(), "1006") || strings.Contains(err.Error(), "EOF")) {
			t.Errorf("the connection dropped without a close: %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Fatal("the client's session did not end")
	}
}

// TestRequestsArrivingDuringShutdownAreCounted: a request that arrives
// while shutdown waits for the running ones (a new stream on an HTTP/2
// connection the shutdown has not closed yet) is counted without a race,
// and the wait ends once every request has.
func TestRequestsArrivingDuringShutdownAreCounted(t *testing.T) {
	for range 200 {
		release := make(chan struct{})
		tracker := &sessionTracker{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) { <-release })}
		serve := func() { tracker.ServeHTTP(nil, &http.Request{}) }
		waited := make(chan struct{})
		go func() {
			tracker.wait(context.Background())
			close(waited)
		}()
		served := make(chan struct{})
		go func() {
			serve()
			close(served)
		}()
		close(release)
		<-served
		select {
		case <-waited:
		case <-time.After(10 * time.Second):
			t.Fatal("shutdown still waits with no request running")
		}
	}
}
