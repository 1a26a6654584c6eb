package node

import (
	"context"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
)

func startableController(t *testing.T) (*PodController, informers.SharedInformerFactory) {
	t.Helper()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	pc, err := NewPodController(PodControllerConfig{
		PodClient: client.CoreV1(), PodInformer: factory.Core().V1().Pods(),
		EventRecorder: record.NewFakeRecorder(10), Provider: nopProvider{},
	})
	if err != nil {
		t.Fatal(err)
	}
	return pc, factory
}

func closed(c <-chan struct{}) bool {
	select {
	case <-c:
		return true
	default:
		return false
	}
}

// TestStartReturnsOnceReady: Start returns with the controller ready and
// running; it stops, Done closing without an error, once ctx ends; it
// runs once.
func TestStartReturnsOnceReady(t *testing.T) {
	pc, factory := startableController(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	factory.Start(ctx.Done())
	defer factory.Shutdown()
	if err := pc.Start(ctx, 1); err != nil {
		t.Fatal(err)
	}
	if !closed(pc.Ready()) {
		t.Error("Start returned before the controller was ready")
	}
	if closed(pc.Done()) {
		t.Fatal("the controller stopped while ctx lives")
	}
	if err := pc.Start(ctx, 1); err == nil || !strings.Contains(err.Error(), "already called") {
		t.Errorf("a second Start: %v, want an error saying Run was already called", err)
	}
	cancel()
	select {
	case <-pc.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the controller did not stop within 10s of ctx ending")
	}
	if err := pc.Err(); err != nil {
		t.Errorf("Err after ctx ended: %v", err)
	}
}

// TestStartFails: a Start that cannot get ready returns the reason and
// leaves the controller stopped with it.
func TestStartFails(t *testing.T) {
	pc, _ := startableController(t)
	if err := pc.Start(context.Background(), 0); err == nil || !strings.Contains(err.Error(), "podSyncWorkers") {
		t.Errorf("Start with no workers: %v", err)
	}
	if !closed(pc.Done()) || pc.Err() == nil {
		t.Error("a failed Start did not leave the controller stopped with its error")
	}

	// Informers never started: caches never sync, and ctx ends.
	pc, _ = startableController(t)
	ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer cancel()
	if err := pc.Start(ctx, 1); err == nil || !strings.Contains(err.Error(), "did not sync") {
		t.Errorf("Start without the informers running: %v, want caches not synced", err)
	}
	if !closed(pc.Done()) || closed(pc.Ready()) {
		t.Error("a Start cut short left the controller ready, or not stopped")
	}
}
