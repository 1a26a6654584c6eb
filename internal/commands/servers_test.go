package commands

import (
	"bufio"
	"context"
	"io"
	"net"
	"net/http"
	"testing"
	"time"
)

// TestShutdownStopsServersTogether: each of many servers holds a stream open
// (as a follow of logs does) past the shutdown deadline. Shutdown cuts them
// all and returns after about one deadline, not one per server: a process of
// a thousand nodes must stop within its pod's grace period.
func TestShutdownStopsServersTogether(t *testing.T) {
	const (
		count    = 40
		deadline = 300 * time.Millisecond
	)
	s := &servers{errs: make(chan error, count)}
	streams := make([]io.ReadCloser, 0, count)
	for range count {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			_, _ = io.WriteString(w, "started\n")
			w.(http.Flusher).Flush()
			<-r.Context().Done()
		})}
		s.serve(context.Background(), "stream", srv, l, false)
		resp, err := http.Get("http://" + l.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		body := bufio.NewReader(resp.Body)
		if line, err := body.ReadString('\n'); err != nil || line != "started\n" {
			t.Fatalf("stream did not start: %q, %v", line, err)
		}
		streams = append(streams, resp.Body)
	}

	start := time.Now()
	s.shutdown(deadline)
	took := time.Since(start)
	// One server after another would take count deadlines (12 s).
	if took > count*deadline/2 {
		t.Errorf("shutdown of %d servers took %s, with a deadline of %s", count, took, deadline)
	}
	// The streams end (cleanly: their context ends with the shutdown).
	for i, body := range streams {
		read := make(chan struct{})
		go func() {
			_, _ = io.ReadAll(body)
			close(read)
		}()
		select {
		case <-read:
		case <-time.After(5 * time.Second):
			t.Errorf("stream %d still open after shutdown", i)
		}
		_ = body.Close()
	}
	select {
	case err := <-s.errs:
		t.Errorf("a server reported an error on shutdown: %v", err)
	default:
	}
}
