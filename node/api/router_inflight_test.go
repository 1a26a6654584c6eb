package api

import (
	"net/http"
	"net/http/httptest"
	"testing"
)

// An idle node keeps no record of requests: a router serves thousands.
// One that leaves cancels what is in flight and what reaches it after.
func TestRoutedNodeKeepsNothingWhileIdle(t *testing.T) {
	n := &routedNode{handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {})}
	serveOnce := func() {
		n.serve(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/stats/summary", nil))
	}
	serveOnce()
	if n.inflight != nil {
		t.Errorf("after its request the node keeps %d in flight", len(n.inflight))
	}

	n.handler = http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) {
		n.unregistered()
		if r.Context().Err() == nil {
			t.Error("the request in flight was not cancelled when its node left")
		}
	})
	serveOnce()
	var late error
	n.handler = http.HandlerFunc(func(_ http.ResponseWriter, r *http.Request) { late = r.Context().Err() })
	serveOnce()
	if late == nil {
		t.Error("a request that reached the node after it left was not cancelled")
	}
}
