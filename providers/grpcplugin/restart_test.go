package grpcplugin_test

import (
	"context"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// TestPluginRestart: while the plugin is away Ping and the calls fail (an
// outage, not "pod not found"); once it is back with the pods it kept, the
// client has reconnected and subscribed again by itself.
func TestPluginRestart(t *testing.T) {
	dir := socketDir(t)
	sock, state := filepath.Join(dir, "p.sock"), filepath.Join(dir, "state")
	stop := servePlugin(t, sock, newMock(t, dir, state))
	p := dial(t, dir, sock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := watch(ctx, p)
	if err := p.CreatePod(ctx, testPod("one")); err != nil {
		t.Fatal(err)
	}
	seen.waitPhase(t, "one", corev1.PodRunning)

	stop()
	if err := p.(node.NodeProvider).Ping(ctx); err == nil {
		t.Fatal("Ping succeeded with the plugin gone")
	}
	if _, err := p.GetPod(ctx, "ns", "one"); err == nil || errdefs.IsNotFound(err) {
		t.Fatalf("GetPod with the plugin gone: %v, want an outage error", err)
	}

	servePlugin(t, sock, newMock(t, dir, state))
	deadline := time.Now().Add(10 * time.Second)
	for p.(node.NodeProvider).Ping(ctx) != nil {
		if time.Now().After(deadline) {
			t.Fatal("Ping still failing 10s after the plugin came back")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if pod, err := p.GetPod(ctx, "ns", "one"); err != nil || pod.Status.Phase != corev1.PodRunning {
		t.Fatalf("the kept pod after the restart: %v %v", err, pod)
	}
	if err := p.CreatePod(ctx, testPod("two")); err != nil {
		t.Fatal(err)
	}
	seen.waitPhase(t, "two", corev1.PodRunning)
}
