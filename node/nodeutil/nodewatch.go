package nodeutil

import (
	"sync"

	corev1 "k8s.io/api/core/v1"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node"
)

// NodeDeletions shares one Node informer among the node controllers of one
// process (node.WithNodeDeletions): each would otherwise watch its own
// Node, a thousand watches for a thousand nodes. The informer must see the
// Nodes of every subscriber, e.g. by a label they all carry; the caller
// starts it.
type NodeDeletions struct {
	mu   sync.RWMutex
	subs map[string]map[*func()]struct{}
}

var _ node.NodeDeletions = (*NodeDeletions)(nil)

// NewNodeDeletions dispatches the deletions nodes sees to the subscribers
// of each Node's name.
func NewNodeDeletions(nodes corev1informers.NodeInformer) (*NodeDeletions, error) {
	d := &NodeDeletions{subs: map[string]map[*func()]struct{}{}}
	_, err := nodes.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{DeleteFunc: d.deleted})
	if err != nil {
		return nil, err
	}
	return d, nil
}

func (d *NodeDeletions) deleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	n, ok := obj.(*corev1.Node)
	if !ok {
		return
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	for f := range d.subs[n.Name] {
		(*f)()
	}
}

// Subscribe implements node.NodeDeletions.
func (d *NodeDeletions) Subscribe(name string, deleted func()) func() {
	key := &deleted
	d.mu.Lock()
	if d.subs[name] == nil {
		d.subs[name] = map[*func()]struct{}{}
	}
	d.subs[name][key] = struct{}{}
	d.mu.Unlock()
	return func() {
		d.mu.Lock()
		delete(d.subs[name], key)
		if len(d.subs[name]) == 0 {
			delete(d.subs, name)
		}
		d.mu.Unlock()
	}
}
