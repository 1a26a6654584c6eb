package nodeutil

import (
	corev1 "k8s.io/api/core/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node"
)

// NodeWatch shares one Node informer among the node controllers of one
// process (node.WithNodeWatch): each would otherwise watch its own Node, a
// thousand watches for a thousand nodes. The informer must see the Nodes
// of every subscriber, e.g. by a label they all carry; the caller starts it.
type NodeWatch struct {
	handlers *dispatcher
}

var _ node.NodeWatch = (*NodeWatch)(nil)

// NewNodeWatch dispatches what nodes sees to the subscribers of each Node's
// name.
func NewNodeWatch(nodes corev1informers.NodeInformer) (*NodeWatch, error) {
	// A subscriber learns of changes from its subscription on, not of the
	// Node as the cache has it then.
	d, err := newDispatcher(nodes.Informer(), nodeName, func(string) ([]any, error) { return nil, nil })
	if err != nil {
		return nil, err
	}
	return &NodeWatch{handlers: d}, nil
}

func nodeName(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if n, ok := obj.(*corev1.Node); ok {
		return n.Name
	}
	return ""
}

// Subscribe implements node.NodeWatch.
func (w *NodeWatch) Subscribe(name string, observed func(*corev1.Node)) func() {
	// add fails only when listing the key's objects does, and there are
	// none to list.
	reg, _ := w.handlers.add(name, cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { observed(obj.(*corev1.Node)) },
		UpdateFunc: func(_, obj any) { observed(obj.(*corev1.Node)) },
		DeleteFunc: func(any) { observed(nil) },
	})
	return func() { _ = w.handlers.remove(name, reg) }
}
