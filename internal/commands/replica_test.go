package commands

import (
	"context"
	"errors"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// TestRunUpBy: a replica's node that is not up by --startup-timeout is
// stopped and its serving fails (which hands it over); one that comes up in
// time runs until its context ends; no deadline waits forever.
func TestRunUpBy(t *testing.T) {
	never := make(chan struct{})
	up := make(chan struct{})
	close(up)
	untilDone := func(ctx context.Context) error { <-ctx.Done(); return nil }

	err := runUpBy(context.Background(), time.Now().Add(50*time.Millisecond), untilDone, never, "node vk0 did not come up")
	if err == nil || err.Error() != "node vk0 did not come up" {
		t.Errorf("not up by the deadline: %v, want the startup error", err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	result := make(chan error, 1)
	go func() { result <- runUpBy(ctx, time.Now().Add(50*time.Millisecond), untilDone, up, "late") }()
	select {
	case err := <-result:
		t.Fatalf("a node up in time stopped at the deadline: %v", err)
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	if err := <-result; err != nil {
		t.Errorf("a node up in time, stopped with its context: %v", err)
	}

	failed := errors.New("provider refused")
	if err := runUpBy(context.Background(), time.Now().Add(time.Minute), func(context.Context) error { return failed }, never, "late"); !errors.Is(err, failed) {
		t.Errorf("a node that fails before the deadline: %v, want its own error", err)
	}
	if err := runUpBy(context.Background(), time.Time{}, func(context.Context) error { return failed }, never, "late"); !errors.Is(err, failed) {
		t.Errorf("no deadline: %v, want run's error", err)
	}
}

// TestLeaseClientHasItsOwnLimits: the leases' client does not share the
// nodes' rate limiter, and its limits cover every node's renewal per retry
// period with room for acquisitions.
func TestLeaseClientHasItsOwnLimits(t *testing.T) {
	shared := &rest.Config{Host: "https://127.0.0.1:6443", QPS: 5, Burst: 10, UserAgent: "virtual-kubelet"}
	c, err := leaseClientFor(shared, 999, 2*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	limiter := c.(*kubernetes.Clientset).CoordinationV1().RESTClient().GetRateLimiter()
	if limiter == nil || limiter.QPS() != 1000 {
		t.Errorf("lease client QPS %v, want 1000 (1,000 leases written twice per 2s retry period)", limiter.QPS())
	}
	if shared.QPS != 5 || shared.Burst != 10 || shared.UserAgent != "virtual-kubelet" {
		t.Errorf("the shared config changed: %+v", shared)
	}
}

// TestStartGateBoundsStarts: no more nodes come up at once than the gate
// has slots; a slot given back twice frees one; a wait ends with its
// context.
func TestStartGateBoundsStarts(t *testing.T) {
	ctx := context.Background()
	gate := make(startGate, 2)
	first, err := gate.enter(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := gate.enter(ctx); err != nil {
		t.Fatal(err)
	}
	waiting, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := gate.enter(waiting); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("a third start with two slots taken: %v, want to wait until its context ends", err)
	}
	first()
	first()
	if len(gate) != 1 {
		t.Fatalf("%d slots taken after one start left twice; want 1", len(gate))
	}
	if _, err := gate.enter(ctx); err != nil {
		t.Fatal(err)
	}
}
