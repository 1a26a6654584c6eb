package commands

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	corev1apply "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// ListenerFieldManager is the field manager of the annotations the daemon
// applies to a managed Node for the shared listener (nodeAnnotations): its
// own, apart from the node controller's status writes, so that applying
// and removing them touches no field the Node's creator set.
const ListenerFieldManager = "virtual-kubelet-listener"

// managedPorts is the pool of the managed nodes' kubelet API ports: with
// the shared listener, its one port for every node.
func (o *Options) managedPorts() *portPool {
	if o.sharedListener() {
		return &portPool{base: int(o.Server.ListenPort), shared: true}
	}
	return newPortPool(&o.Server)
}

// applyListenerAnnotations applies annotations to managed Node n (read
// afresh: its UID is the precondition, so a Node deleted meanwhile is not
// created again) under ListenerFieldManager. remove takes them off again
// when the daemon stops serving n: an apply of none under the same manager
// drops exactly what it applied. A Node gone by then is left alone; with
// --leader-elect, a replica that lost n has its writes refused
// (ha.FencedTransport), so it does not take them off the replica that now
// serves n.
func applyListenerAnnotations(ctx context.Context, client kubernetes.Interface, n *corev1.Node, annotations map[string]string) (remove func(), err error) {
	opts := metav1.ApplyOptions{FieldManager: ListenerFieldManager, Force: true}
	apply := corev1apply.Node(n.Name).WithUID(n.UID).WithAnnotations(annotations)
	if _, err := client.CoreV1().Nodes().Apply(ctx, apply, opts); apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		// A conflict is the UID precondition: another Node by that name.
		return nil, fmt.Errorf("node %s: %w", n.Name, node.ErrNodeDeleted)
	} else if err != nil {
		return nil, fmt.Errorf("node %s: applying the shared listener's annotations: %w", n.Name, err)
	}
	// What remove needs, not the Node: a thousand nodes' would stay live.
	name, uid := n.Name, n.UID
	return func() {
		// The node's context has ended; its values (the replica's fence)
		// still apply.
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
		defer cancel()
		_, err := client.CoreV1().Nodes().Apply(ctx, corev1apply.Node(name).WithUID(uid), opts)
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			log.G(ctx).WithField("node", name).WithError(err).Warn("taking the shared listener's annotations off the node")
		}
	}, nil
}
