package nodeutil_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

// TestStartThatFailsHasStopped: a node that cannot start returns the
// error from Start with everything it started stopped: Done is closed,
// Err is that error, and Ready never closes.
func TestStartThatFailsHasStopped(t *testing.T) {
	client := fake.NewClientset()
	refused := apierrors.NewForbidden(corev1.Resource("nodes"), "vk3", nil)
	client.PrependReactor("*", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, refused
	})
	n, err := nodeutil.New(nodeutil.Config{
		Client:   client,
		Node:     &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk3"}},
		Provider: nopProvider{},
	})
	if err != nil {
		t.Fatal(err)
	}
	err = n.Start(context.Background())
	if !apierrors.IsForbidden(err) {
		t.Fatalf("Start with the Node refused: %v, want the refusal", err)
	}
	select {
	case <-n.Done():
	default:
		t.Fatal("Start failed but Done is not closed")
	}
	if got := n.Err(); !apierrors.IsForbidden(got) {
		t.Errorf("Err after a failed Start: %v, want the refusal", got)
	}
	select {
	case <-n.Ready():
		t.Error("Ready closed for a node that did not start")
	default:
	}
}
