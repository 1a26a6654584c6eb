package node_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node"
)

// simulator reports the node it was handed, NotReady.
type simulator struct {
	*testProvider
	base *corev1.Node
}

func (s *simulator) Ping(ctx context.Context) error { return ctx.Err() }

func (s *simulator) SimulateFrom(registered *corev1.Node) { s.base = registered }

func (s *simulator) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) {
	n := s.base.DeepCopy()
	n.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}
	cb(n)
}

// TestNodeStatusSimulatorGetsTheRegisteredNode: NodeProviderFor hands a
// NodeStatusSimulator a copy of the Node being registered, which the nodes
// it reports keep.
func TestNodeStatusSimulatorGetsTheRegisteredNode(t *testing.T) {
	registered := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk", Labels: map[string]string{"type": "virtual-kubelet"}}}
	sim := &simulator{testProvider: newTestProvider()}
	np := node.CapabilitiesOf(sim).NodeProviderFor(registered)
	if sim.base == nil || sim.base == registered || sim.base.Labels["type"] != "virtual-kubelet" {
		t.Fatalf("the simulator was handed %+v", sim.base)
	}
	var got *corev1.Node
	np.NotifyNodeStatus(context.Background(), func(n *corev1.Node) { got = n })
	if got == nil || got.Labels["type"] != "virtual-kubelet" || got.Status.Conditions[0].Status != corev1.ConditionFalse {
		t.Errorf("reported %+v", got)
	}
}
