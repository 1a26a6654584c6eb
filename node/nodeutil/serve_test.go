package nodeutil_test

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

// TestServerThatFailsStopsTheNode: a kubelet API server that fails once
// the node is ready stops the node, with the server's error.
func TestServerThatFailsStopsTheNode(t *testing.T) {
	n, err := nodeutil.New(nodeutil.Config{
		Client:   fake.NewClientset(),
		Node:     &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk4"}},
		Provider: nopProvider{},
	})
	if err != nil {
		t.Fatal(err)
	}
	failing := make(chan struct{})
	refused := errors.New("listener closed")
	nodeutil.ServeWith(n, func(ctx context.Context) error {
		select {
		case <-failing:
			return refused
		case <-ctx.Done():
			return nil
		}
	})
	if err := n.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	close(failing)
	select {
	case <-n.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the node still runs 10s after its server failed")
	}
	if err := n.Err(); !errors.Is(err, refused) {
		t.Errorf("Err after the server failed: %v, want %v", err, refused)
	}
}
