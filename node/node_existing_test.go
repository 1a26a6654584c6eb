package node

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestExistingNodeIsNeverCreated: a controller of a Node someone else
// created does not create it when it is missing, neither at start nor
// once it is deleted, and stops with ErrNodeDeleted.
func TestExistingNodeIsNeverCreated(t *testing.T) {
	client := fake.NewClientset()
	n, err := NewNodeController(NaiveNodeProvider{}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "karp"}}, client.CoreV1().Nodes(), WithExistingNode())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Run(ctx); !errors.Is(err, ErrNodeDeleted) {
		t.Errorf("Run without the Node: %v, want ErrNodeDeleted", err)
	}
	for _, a := range client.Actions() {
		if a.GetVerb() != "get" {
			t.Errorf("%s %s: a missing Node is only read", a.GetVerb(), a.GetResource().Resource)
		}
	}
}

// TestExistingNodeKeepsTheCreatorsFields: the controller writes the status
// only: the creator's labels, annotations and taints stay as they were,
// and a deleted Node ends Run with ErrNodeDeleted, not a new Node.
func TestExistingNodeKeepsTheCreatorsFields(t *testing.T) {
	created := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "karp", UID: "u1", Labels: map[string]string{"kwok.x-k8s.io/node": "fake"}, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}},
		Spec:       corev1.NodeSpec{ProviderID: "kwok://karp", Taints: []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}},
	}
	client := fake.NewClientset(created)
	desired := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "karp", Labels: map[string]string{"type": "virtual-kubelet"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "virtual-kubelet.io/provider", Effect: corev1.TaintEffectNoSchedule}}},
		Status:     corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}},
	}
	watch := &handWatch{}
	n, err := NewNodeController(NaiveNodeProvider{}, desired, client.CoreV1().Nodes(), WithExistingNode(), WithNodeWatch(watch))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- n.Run(ctx) }()
	select {
	case <-n.Ready():
	case err := <-done:
		t.Fatalf("Run: %v", err)
	}
	for _, a := range client.Actions() {
		if a.GetSubresource() == "" && a.GetVerb() != "get" && a.GetVerb() != "list" && a.GetVerb() != "watch" {
			t.Errorf("%s nodes: only the status of an existing Node is written", a.GetVerb())
		}
	}
	got, err := client.CoreV1().Nodes().Get(ctx, "karp", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["type"] != "" || len(got.Spec.Taints) != 1 || got.Spec.Taints[0].Key != "karpenter.sh/unregistered" || got.Annotations[TaintsAnnotation] != "" {
		t.Errorf("labels %v taints %v annotations %v: the creator's must stay untouched", got.Labels, got.Spec.Taints, got.Annotations)
	}
	if err := client.CoreV1().Nodes().Delete(ctx, "karp", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	watch.observed(nil)
	select {
	case err := <-done:
		if !errors.Is(err, ErrNodeDeleted) {
			t.Errorf("Run after the Node was deleted: %v, want ErrNodeDeleted", err)
		}
	case <-ctx.Done():
		t.Fatal("Run did not stop once the Node was deleted")
	}
	if _, err := client.CoreV1().Nodes().Get(context.Background(), "karp", metav1.GetOptions{}); err == nil {
		t.Error("the deleted Node was created again")
	}
}

// handWatch is a NodeWatch the test drives by hand.
type handWatch struct{ observed func(*corev1.Node) }

func (w *handWatch) Subscribe(_ string, observed func(*corev1.Node)) func() {
	w.observed = observed
	return func() {}
}
