package commands

import (
	"fmt"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// heldRoundTripper answers each request once release is closed, and counts
// the requests it holds.
type heldRoundTripper struct {
	release chan struct{}
	held    atomic.Int32
}

func (h *heldRoundTripper) RoundTrip(*http.Request) (*http.Response, error) {
	h.held.Add(1)
	<-h.release
	return &http.Response{StatusCode: 200, Body: io.NopCloser(strings.NewReader("{}"))}, nil
}

// Past the bound, requests wait until a body is closed; lease renewals and
// watches do not wait behind pod work.
func TestInFlightLimit(t *testing.T) {
	next := &heldRoundTripper{release: make(chan struct{})}
	rt := limitInFlight(2)(next)
	done := make(chan *http.Response, 5)
	do := func(url string) {
		go func() {
			req, _ := http.NewRequest(http.MethodPatch, url, nil)
			resp, err := rt.RoundTrip(req)
			if err != nil {
				t.Errorf("%s: %v", url, err)
			}
			if strings.Contains(url, "/pods/") {
				done <- resp
			}
		}()
	}
	waitHeld := func(n int32) {
		t.Helper()
		poll.Until(t, 5*time.Second, fmt.Sprintf("%d requests at the server", n), func() (bool, string) {
			return next.held.Load() == n, fmt.Sprintf("%d requests reached the server", next.held.Load())
		})
	}
	for _, pod := range []string{"a", "b", "c"} {
		do("https://api/api/v1/namespaces/ns/pods/" + pod + "/status")
	}
	waitHeld(2)
	do("https://api/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases/vk0")
	do("https://api/api/v1/pods?watch=true")
	waitHeld(4)
	time.Sleep(50 * time.Millisecond)
	if n := next.held.Load(); n != 4 {
		t.Fatalf("%d requests reached the server past the bound of 2 (plus a lease and a watch)", n)
	}
	close(next.release)
	// The third pod request goes once one of the first two is read.
	for range 3 {
		if resp := <-done; resp != nil {
			_ = resp.Body.Close()
		}
	}
	waitHeld(5)
}
