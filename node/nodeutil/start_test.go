package nodeutil_test

import (
	"context"
	"testing"
	"time"

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
// Err is that error, Ready never closes, and AfterStop's funcs run, those
// given before Start and after.
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
	ran := make(chan string, 2)
	n.AfterStop(func() { ran <- "before" })
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
	n.AfterStop(func() { ran <- "after" })
	got := map[string]bool{}
	for range 2 {
		select {
		case f := <-ran:
			got[f] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("AfterStop funcs run: %v, want before and after", got)
		}
	}
}
