package commands

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
)

// fakeStarter is a node whose start-up is start; once up, it runs until
// its context ends.
type fakeStarter struct {
	start func(ctx context.Context) error
	done  chan struct{}
}

func newFakeStarter(start func(ctx context.Context) error) *fakeStarter {
	return &fakeStarter{start: start, done: make(chan struct{})}
}

func (f *fakeStarter) Start(ctx context.Context) error {
	if err := f.start(ctx); err != nil {
		close(f.done)
		return err
	}
	context.AfterFunc(ctx, func() { close(f.done) })
	return nil
}

func (f *fakeStarter) Done() <-chan struct{} { return f.done }

// TestStartUpBy: a replica's node that is not up by --startup-timeout is
// stopped and its start fails (which hands it over); one that comes up in
// time runs past the deadline until its context ends; no deadline waits
// forever.
func TestStartUpBy(t *testing.T) {
	never := func(ctx context.Context) error { <-ctx.Done(); return ctx.Err() }
	up := func(context.Context) error { return nil }

	late := newFakeStarter(never)
	if _, err := startUpBy(context.Background(), time.Now().Add(50*time.Millisecond), late, "node vk0 did not come up"); err == nil || err.Error() != "node vk0 did not come up" {
		t.Errorf("not up by the deadline: %v, want the startup error", err)
	}
	select {
	case <-late.Done():
	default:
		t.Error("startUpBy returned before the late node stopped")
	}

	ctx, cancel := context.WithCancel(context.Background())
	inTime := newFakeStarter(up)
	release, err := startUpBy(ctx, time.Now().Add(50*time.Millisecond), inTime, "late")
	if err != nil {
		t.Fatalf("a node up in time: %v", err)
	}
	select {
	case <-inTime.Done():
		t.Fatal("a node up in time stopped at the deadline")
	case <-time.After(200 * time.Millisecond):
	}
	cancel()
	<-inTime.Done()
	release()

	failed := errors.New("provider refused")
	refuses := func(context.Context) error { return failed }
	if _, err := startUpBy(context.Background(), time.Now().Add(time.Minute), newFakeStarter(refuses), "late"); !errors.Is(err, failed) {
		t.Errorf("a node that fails before the deadline: %v, want its own error", err)
	}
	if _, err := startUpBy(context.Background(), time.Time{}, newFakeStarter(refuses), "late"); !errors.Is(err, failed) {
		t.Errorf("no deadline: %v, want start's error", err)
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

// TestManagedPrepareRunsInTheStartSlot: a managed node's first step (its
// fresh read and listener annotations) waits for a slot of the start gate,
// so that a thousand Nodes seen at once are not a thousand requests and
// stacks in flight; a step that fails gives its slot back.
func TestManagedPrepareRunsInTheStartSlot(t *testing.T) {
	const slots, nodes = 2, 6
	gate := make(startGate, slots)
	var mu sync.Mutex
	inFlight, most := 0, 0
	release := make(chan struct{})
	failed := errors.New("prepare failed")
	prepare := func(context.Context) (*corev1.Node, func(), error) {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		<-release
		mu.Lock()
		inFlight--
		mu.Unlock()
		return nil, func() { t.Error("undo of a step that failed") }, failed
	}
	errs := make(chan error, nodes)
	for i := range nodes {
		go func() {
			_, _, err := startNode(context.Background(), &Options{}, fmt.Sprintf("n%d", i), 10250, "127.0.0.1", nil, nil, gate, prepare)
			errs <- err
		}()
	}
	time.Sleep(100 * time.Millisecond) // let every start reach the gate
	close(release)
	for range nodes {
		if err := <-errs; !errors.Is(err, failed) {
			t.Errorf("start: %v, want the step's error", err)
		}
	}
	if most > slots {
		t.Errorf("%d first steps in flight at once with %d slots", most, slots)
	}
	if len(gate) != 0 {
		t.Errorf("%d slots still taken after every start failed", len(gate))
	}
}
