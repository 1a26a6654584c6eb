package node

import (
	"errors"
	"fmt"
	"time"

	coordclientset "k8s.io/client-go/kubernetes/typed/coordination/v1"

	"github.com/vkubelet/virtual-kubelet/node/intern"
)

// ErrConflictingLeaseControllerConfiguration is returned when the lease
// controller related options have been specified multiple times.
var ErrConflictingLeaseControllerConfiguration = errors.New("multiple, conflicting lease configurations have been put into place")

// NodeControllerOpt are the functional options used for configuring a node.
type NodeControllerOpt func(*NodeController) error //nolint:revive

// WithNodeEnableLeaseV1 makes the controller hold the node's
// coordination.k8s.io/v1 Lease, the heartbeat the node lifecycle controller
// reads. A zero lease duration means DefaultLeaseDuration.
// The lease is renewed every DefaultRenewIntervalFraction of its duration.
//
// The client must be for the kube-node-lease namespace, where the node
// lifecycle controller looks for node leases.
func WithNodeEnableLeaseV1(client coordclientset.LeaseInterface, leaseDurationSeconds int32) NodeControllerOpt {
	return WithNodeEnableLeaseV1WithRenewInterval(client, leaseDurationSeconds, 0)
}

// WithNodeEnableLeaseV1WithRenewInterval enables support for v1 leases, and
// sets a specific renew interval, as opposed to the standard multiplier
// specified by DefaultRenewIntervalFraction. A zero interval means that
// default fraction.
func WithNodeEnableLeaseV1WithRenewInterval(client coordclientset.LeaseInterface, leaseDurationSeconds int32, interval time.Duration) NodeControllerOpt {
	return func(n *NodeController) error {
		if n.leases != nil {
			return ErrConflictingLeaseControllerConfiguration
		}
		if client == nil {
			return errors.New("node controller: the lease option needs a lease client")
		}
		if leaseDurationSeconds < 0 {
			return fmt.Errorf("node controller: lease duration must not be negative, got %d", leaseDurationSeconds)
		}
		if leaseDurationSeconds == 0 {
			leaseDurationSeconds = DefaultLeaseDuration
		}
		if interval == 0 {
			interval = time.Duration(float64(leaseDurationSeconds) * DefaultRenewIntervalFraction * float64(time.Second))
		}
		n.leases, n.leaseDuration, n.renewInterval = client, leaseDurationSeconds, interval
		return nil
	}
}

// WithNodePingInterval sets the interval between checking for node statuses
// via Ping(). If node leases are not supported (or not enabled), this is the
// frequency with which the node status will be updated in Kubernetes.
func WithNodePingInterval(d time.Duration) NodeControllerOpt {
	return func(n *NodeController) error {
		n.pingInterval = d
		return nil
	}
}

// WithNodePingTimeout limits the amount of time that the virtual kubelet will
// wait for the node provider to respond to the ping callback. If it does not
// return within this time, it will be considered an error condition. It
// defaults to the ping interval.
func WithNodePingTimeout(timeout time.Duration) NodeControllerOpt {
	return func(n *NodeController) error {
		n.pingTimeout = timeout
		return nil
	}
}

// WithNodeStatusUpdateErrorHandler adds an error handler for cases where there
// is an error when updating the node status. This allows the caller to have
// some control on how errors are dealt with when updating a node's status.
//
// The error passed to the handler will be the error received from kubernetes
// when updating node status. If the handler returns an error, Run stops and
// Err returns it. Without a handler, a node that was deleted is registered
// again and other errors are logged and retried at the next update.
func WithNodeStatusUpdateErrorHandler(h ErrorHandler) NodeControllerOpt {
	return func(n *NodeController) error {
		n.errorHandler = h
		return nil
	}
}

// WithNodeStatusUpdateInterval sets the interval for updating node status.
// This is only used when leases are supported and only for updating the
// actual node status, not the node lease. When node leases are not enabled
// (or are not supported on the cluster) this has no affect and node status is
// updated on the "ping" interval.
func WithNodeStatusUpdateInterval(d time.Duration) NodeControllerOpt {
	return func(n *NodeController) error {
		n.statusInterval = d
		return nil
	}
}

// WithNodeWatch makes the controller learn what the API server has for its
// Node from w instead of from a watch of its own.
func WithNodeWatch(w NodeWatch) NodeControllerOpt {
	return func(n *NodeController) error {
		n.watch = w
		return nil
	}
}

// WithNodeLabelGuard has the controller restrict the labels the provider
// reports with g, the guard that already restricted the provider's labels
// in the Node given to NewNodeController, so that a refused label is named
// once in all. Without it the controller has a guard of its own.
func WithNodeLabelGuard(g *NodeLabelGuard) NodeControllerOpt {
	return func(n *NodeController) error {
		if g == nil || g.nodeName != n.name {
			return fmt.Errorf("node controller: the label guard must be node %s's", n.name)
		}
		n.labels = g
		return nil
	}
}

// WithNodeInterner shares, through in, what the controller's copy of the
// node repeats with other nodes of the process (capacity, allocatable,
// annotations, the node's software), as nodeutil.TrimNodesWith does for a
// Node informer's cache: a process of a thousand like nodes keeps each
// such value once.
func WithNodeInterner(in *intern.Interner) NodeControllerOpt {
	return func(n *NodeController) error {
		n.interner = in
		return nil
	}
}
