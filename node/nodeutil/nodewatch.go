package nodeutil

import (
	"sync"

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
	mu   sync.RWMutex
	subs map[string]map[*func(*corev1.Node)]struct{}
}

var _ node.NodeWatch = (*NodeWatch)(nil)

// NewNodeWatch dispatches what nodes sees to the subscribers of each Node's
// name.
func NewNodeWatch(nodes corev1informers.NodeInformer) (*NodeWatch, error) {
	w := &NodeWatch{subs: map[string]map[*func(*corev1.Node)]struct{}{}}
	_, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { w.dispatch(obj, false) },
		UpdateFunc: func(_, obj any) { w.dispatch(obj, false) },
		DeleteFunc: func(obj any) { w.dispatch(obj, true) },
	})
	if err != nil {
		return nil, err
	}
	return w, nil
}

func (w *NodeWatch) dispatch(obj any, deleted bool) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	name, seen := n.Name, n
	if deleted {
		seen = nil
	}
	w.mu.RLock()
	defer w.mu.RUnlock()
	for f := range w.subs[name] {
		(*f)(seen)
	}
}

// Subscribe implements node.NodeWatch.
func (w *NodeWatch) Subscribe(name string, observed func(*corev1.Node)) func() {
	key := &observed
	w.mu.Lock()
	if w.subs[name] == nil {
		w.subs[name] = map[*func(*corev1.Node)]struct{}{}
	}
	w.subs[name][key] = struct{}{}
	w.mu.Unlock()
	return func() {
		w.mu.Lock()
		delete(w.subs[name], key)
		if len(w.subs[name]) == 0 {
			delete(w.subs, name)
		}
		w.mu.Unlock()
	}
}
