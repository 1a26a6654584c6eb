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

// watchDeletion signals the control loop when our Node is deleted, so it is
// registered again at once rather than at the next status update.
func (n *NodeController) watchDeletion(ctx context.Context) {
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
			DeleteFunc: func(any) { n.signalDeleted() },
		},
	})
	informer.RunWithContext(ctx)
}

// signalDeleted tells the control loop the Node is gone; one pending signal
// is enough.
func (n *NodeController) signalDeleted() {
	select {
	case n.nodeDeleted <- struct{}{}:
	default:
	}
}

// NodeDeletions tells node controllers that their Node was deleted. The
// controllers of one process can share one (nodeutil.NodeDeletions is one
// Node informer for all of them) instead of each watching its own Node.
type NodeDeletions interface {
	// Subscribe calls deleted each time the Node called name is deleted,
	// until the returned function is called. deleted must not block.
	Subscribe(name string, deleted func()) (unsubscribe func())
}
