package commands

import (
	"io"
	"net/http"
	"strings"
	"sync"

	"golang.org/x/sync/semaphore"
)

// inFlightLimit bounds the daemon's requests in flight to the API server.
// A process of a thousand nodes has thousands of queue workers: unbounded,
// a burst put up to 8,000 requests in flight at once, past what the API
// server runs at a time (600 by default), and client-go dialed a new TLS
// connection for each request that found its HTTP/2 connection at the
// server's stream limit (hundreds at the start of a burst). Requests past
// the bound wait here instead. Lease renewals have slots of their own, so a
// burst of pod work never holds up a node's heartbeat; watches, which last,
// are not counted.
type inFlightLimit struct {
	next   http.RoundTripper
	work   *semaphore.Weighted
	leases *semaphore.Weighted
}

// limitInFlight wraps rt; n is the requests other than lease requests that
// may be in flight at once, and as many lease requests may be too.
func limitInFlight(n int64) func(http.RoundTripper) http.RoundTripper {
	return func(rt http.RoundTripper) http.RoundTripper {
		return &inFlightLimit{next: rt, work: semaphore.NewWeighted(n), leases: semaphore.NewWeighted(n)}
	}
}

func (l *inFlightLimit) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.URL.Query().Get("watch") == "true" {
		return l.next.RoundTrip(req)
	}
	slots := l.work
	if strings.HasPrefix(req.URL.Path, "/apis/coordination.k8s.io/") {
		slots = l.leases
	}
	if err := slots.Acquire(req.Context(), 1); err != nil {
		return nil, err
	}
	resp, err := l.next.RoundTrip(req)
	if err != nil {
		slots.Release(1)
		return nil, err
	}
	// The slot is held until the body is read and closed.
	resp.Body = &releasingBody{ReadCloser: resp.Body, release: sync.OnceFunc(func() { slots.Release(1) })}
	return resp, nil
}

// WrappedRoundTripper lets client-go's debugging wrappers see through.
func (l *inFlightLimit) WrappedRoundTripper() http.RoundTripper { return l.next }

type releasingBody struct {
	io.ReadCloser
	release func()
}

func (b *releasingBody) Close() error {
	defer b.release()
	return b.ReadCloser.Close()
}
