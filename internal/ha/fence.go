package ha

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"
	"time"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// Fence says whether a replica may still act for a node it holds: until
// RenewDeadline after the start of its last successful write of the node's
// holder lease. Another replica may take the node only LeaseDuration after
// it saw that write, so with RenewDeadline shorter than LeaseDuration the
// fence is down before anyone else can hold the node. Times are taken from
// the monotonic clock: a paused process finds its fence down on resuming.
type Fence struct {
	node          string
	renewDeadline time.Duration

	mu         sync.Mutex
	validUntil time.Time
}

// NewFence is the fence of one holding of node, down until a renewal.
func NewFence(node string, renewDeadline time.Duration) *Fence {
	return &Fence{node: node, renewDeadline: renewDeadline}
}

// Valid reports whether the holder may still act for the node.
func (f *Fence) Valid() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return time.Now().Before(f.validUntil)
}

// renewed extends the fence after a lease write sent at start succeeded.
func (f *Fence) renewed(start time.Time) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if until := start.Add(f.renewDeadline); until.After(f.validUntil) {
		f.validUntil = until
	}
}

// drop takes the fence down: the lease was released.
func (f *Fence) drop() {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.validUntil = time.Time{}
}

// until is when the fence goes down, as of now.
func (f *Fence) until() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.validUntil
}

// ErrFenced is the error of an API request refused because the replica no
// longer holds the request's node.
var ErrFenced = errors.New("no longer holding the node's lease")

// Context returns a context that carries the fence, for FencedTransport,
// and is cancelled when the fence goes down or parent ends. Call cancel to
// release it.
func (f *Fence) Context(parent context.Context) (ctx context.Context, cancel context.CancelFunc) {
	ctx, cancelCause := context.WithCancelCause(context.WithValue(parent, fenceKey{}, f))
	go func() {
		for {
			wait := time.Until(f.until())
			if wait <= 0 {
				if ctx.Err() == nil {
					log.G(ctx).WithError(ErrFenced).Warnf("holder lease not renewed within %s: stopping every provider call and status write for the node", f.renewDeadline)
				}
				cancelCause(fmt.Errorf("node %s: %w", f.node, ErrFenced))
				return
			}
			t := time.NewTimer(wait)
			select {
			case <-ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
		}
	}()
	return ctx, func() { cancelCause(context.Canceled) }
}

type fenceKey struct{}

// FenceOf is the fence ctx carries (see Context), or nil.
func FenceOf(ctx context.Context) *Fence {
	f, _ := ctx.Value(fenceKey{}).(*Fence)
	return f
}

// Guard refuses a provider call (method names it) once the fence is down,
// checked on the caller's goroutine, before the call leaves the process:
// the node.CallGuard of the node's provider (node.Capabilities.Guarded).
// A resumed replica whose fence's context is not yet cancelled sends
// nothing to the backend for a node it may no longer hold.
func (f *Fence) Guard(_ context.Context, method string) error {
	if !f.Valid() {
		return fmt.Errorf("provider %s for node %s: %w", method, f.node, ErrFenced)
	}
	return nil
}

// FencedTransport refuses a request whose context carries a Fence that is
// down, before it is sent: the check is made on the request's goroutine,
// however late the fence's timer runs. Requests without a fence pass.
func FencedTransport(rt http.RoundTripper) http.RoundTripper {
	return fencedTransport{rt}
}

type fencedTransport struct{ next http.RoundTripper }

func (t fencedTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if f := FenceOf(req.Context()); f != nil && !f.Valid() {
		return nil, fmt.Errorf("%s %s for node %s: %w", req.Method, req.URL.Path, f.node, ErrFenced)
	}
	return t.next.RoundTrip(req)
}
