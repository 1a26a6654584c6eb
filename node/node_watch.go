package node

import (
	"context"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

// NodeWatch tells node controllers what the API server has for their Node.
// The controllers of one process can share one (nodeutil.NodeWatch is one
// Node informer for all of them) instead of each watching its own Node.
type NodeWatch interface {
	// Subscribe calls observed with the Node called name each time the
	// watch sees it added or updated, and with nil each time it is
	// deleted, until the returned function is called. observed must not
	// block or modify the Node.
	Subscribe(name string, observed func(*corev1.Node)) (unsubscribe func())
}

// watchNode watches our own Node when no NodeWatch was given: the kubelet
// does the same, and its Node authorizer lets a node watch only itself.
func (n *NodeController) watchNode(ctx context.Context) {
	selector := fields.OneTermEqualSelector("metadata.name", n.name).String()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			o.FieldSelector = selector
			return n.nodes.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = selector
			return n.nodes.Watch(ctx, o)
		},
	}
	_, informer := cache.NewInformerWithOptions(cache.InformerOptions{
		ListerWatcher: lw,
		ObjectType:    &corev1.Node{},
		Handler: cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { n.observed(obj.(*corev1.Node)) },
			UpdateFunc: func(_, obj any) { n.observed(obj.(*corev1.Node)) },
			DeleteFunc: func(any) { n.observed(nil) },
		},
	})
	informer.RunWithContext(ctx)
}

// observed tells the control loop what needs mending in the Node as the
// API server has it (nil: deleted): a deleted Node is registered again,
// and a condition of ours whose status someone else changed is written
// again, both at once rather than at the next status report. The node
// lifecycle controller sets Ready to Unknown when heartbeats stop; the
// kubelet puts its own status back within seconds of recovering, and so
// must we.
func (n *NodeController) observed(node *corev1.Node) {
	switch {
	case node == nil:
		n.post(evDeleted, nil)
	case conditionsOverwritten(n.reported.Load().Status.Conditions, node.Status.Conditions):
		n.post(evStale, nil)
	}
}

// conditionsOverwritten reports whether a condition type of ours has
// another status in theirs. A type missing there is not counted: the Node
// of a watch may predate our first status write.
func conditionsOverwritten(ours, theirs []corev1.NodeCondition) bool {
	for _, o := range ours {
		for _, t := range theirs {
			if t.Type == o.Type && t.Status != o.Status {
				return true
			}
		}
	}
	return false
}
