package node

import (
	"context"
	"errors"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ErrNodeDeleted is what Run returns, for a controller of an existing Node
// (WithExistingNode), once that Node is deleted, or replaced by another of
// the same name: the controller stops rather than create it again.
var ErrNodeDeleted = errors.New("the node was deleted from the API server")

// WithExistingNode makes the controller serve a Node that someone else
// created and owns (a cluster autoscaler's, kwok's way): it never creates
// the Node, and writes only its status under FieldManager, so the labels,
// annotations, taints and spec the creator set are left as they are. The
// labels, annotations, taints and spec of the Node given to
// NewNodeController are not written. Once the Node is deleted, Run returns
// ErrNodeDeleted instead of registering it again; its lease is not renewed
// after that.
func WithExistingNode() NodeControllerOpt {
	return func(n *NodeController) error {
		n.existing = true
		return nil
	}
}

// adoptObject reads the existing Node in place of applying labels and spec
// to it. A Node that is gone, or that is another Node than the one first
// read (deleted and created again), is ErrNodeDeleted.
func (n *NodeController) adoptObject(ctx context.Context) (*corev1.Node, error) {
	got, err := n.nodes.Get(ctx, n.name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("node %s: %w", n.name, ErrNodeDeleted)
	}
	if err != nil {
		return nil, err
	}
	if n.uid != "" && got.UID != n.uid {
		return nil, fmt.Errorf("node %s (uid %s, now %s): %w", n.name, n.uid, got.UID, ErrNodeDeleted)
	}
	n.uid = got.UID
	return got, nil
}

// existingGone reports whether err means, for a controller of an existing
// Node, that the Node is gone: not found, or a write refused because the
// Node's UID is no longer the one written (a conflict on the UID
// precondition of applyStatus).
func (n *NodeController) existingGone(err error) bool {
	return n.existing && (errors.Is(err, ErrNodeDeleted) || apierrors.IsNotFound(err) || apierrors.IsConflict(err))
}
