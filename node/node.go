package node

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/types"
	coordclientset "k8s.io/client-go/kubernetes/typed/coordination/v1"
	v1 "k8s.io/client-go/kubernetes/typed/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace"
)

const (
	// DefaultPingInterval is how often the provider is pinged, and, without
	// leases, how often the node status is written.
	DefaultPingInterval = 10 * time.Second
	// DefaultStatusUpdateInterval is how often the full node status is
	// written when leases carry the heartbeat and nothing changed. The
	// kubelet's nodeStatusReportFrequency is 5 minutes, which the daemon
	// uses; this default keeps the prior project's value.
	DefaultStatusUpdateInterval = 1 * time.Minute
)

// NodeController deals with creating and managing a node object in
// Kubernetes. It can register a node with Kubernetes and periodically update
// its status. NodeController manages a single node entity.
type NodeController struct { //nolint:revive
	p     NodeProvider
	nodes v1.NodeInterface
	// name of the Node; the provider's updates cannot change it.
	name string
	// labels restricts the labels the provider's updates set.
	labels *NodeLabelGuard

	leases coordclientset.LeaseInterface
	// lease is the lease as our last write left it, nil when unknown; only
	// the control loop uses it.
	lease         *coordinationv1.Lease
	leaseDuration int32
	renewInterval time.Duration

	pingInterval   time.Duration
	pingTimeout    time.Duration
	statusInterval time.Duration
	errorHandler   ErrorHandler

	// desired is the node as we want it in the API server; only the control
	// loop goroutine changes it once Run has started, and never in place:
	// each change makes a new node (setDesired, withConditions), sharing
	// what did not change, so that readers of reported need no copy of
	// their own. A thousand nodes keep one copy each, not two.
	desired *corev1.Node
	// reported is desired, for readers outside the control loop.
	reported atomic.Pointer[corev1.Node]
	// uid of the registered Node, owner of the lease.
	uid types.UID
	// existing: the Node is someone else's (WithExistingNode).
	existing bool

	statusUpdates chan *corev1.Node
	nodeDeleted   chan struct{}
	// nodeStale says someone else changed a condition of ours.
	nodeStale chan struct{}
	watch     NodeWatch

	ready chan struct{}
	run   *runOnce
}

// NewNodeController creates a new node controller. This does not have any
// side-effects on the system or kubernetes.
//
// Use the node's `Run` method to register and run the loops to update the
// node in Kubernetes.
//
// Note: When there are multiple NodeControllerOpts which apply against the
// same underlying options, the last NodeControllerOpt will win; the lease
// options are the exception and conflict with each other.
func NewNodeController(p NodeProvider, node *corev1.Node, nodes v1.NodeInterface, opts ...NodeControllerOpt) (*NodeController, error) {
	if p == nil {
		return nil, errors.New("node controller: a NodeProvider is required")
	}
	if node == nil || node.Name == "" {
		return nil, errors.New("node controller: a node with a name is required")
	}
	if nodes == nil {
		return nil, errors.New("node controller: a node client is required")
	}
	n := &NodeController{
		p:              p,
		nodes:          nodes,
		name:           node.Name,
		desired:        node.DeepCopy(),
		pingInterval:   DefaultPingInterval,
		statusInterval: DefaultStatusUpdateInterval,
		statusUpdates:  make(chan *corev1.Node, 1),
		nodeDeleted:    make(chan struct{}, 1),
		nodeStale:      make(chan struct{}, 1),
		ready:          make(chan struct{}),
		run:            newRunOnce(),
	}
	n.reported.Store(n.desired)
	n.labels = NewNodeLabelGuard(n.name)
	for _, o := range opts {
		if err := o(n); err != nil {
			return nil, err
		}
	}
	if n.pingInterval <= 0 {
		return nil, fmt.Errorf("node controller: ping interval must be positive, got %s", n.pingInterval)
	}
	if n.statusInterval <= 0 {
		return nil, fmt.Errorf("node controller: status update interval must be positive, got %s", n.statusInterval)
	}
	if n.pingTimeout < 0 {
		return nil, fmt.Errorf("node controller: ping timeout must not be negative, got %s", n.pingTimeout)
	}
	if n.pingTimeout == 0 {
		n.pingTimeout = n.pingInterval
	}
	if n.leases != nil {
		if n.renewInterval <= 0 || n.renewInterval >= time.Duration(n.leaseDuration)*time.Second {
			return nil, fmt.Errorf("node controller: lease renew interval %s must be positive and shorter than the lease duration %ds", n.renewInterval, n.leaseDuration)
		}
	}
	return n, nil
}

// Ready returns a channel that gets closed when the node is fully up and
// running. Note that if there is an error on startup this channel will never
// be closed.
func (n *NodeController) Ready() <-chan struct{} { return n.ready }

// Done signals to the caller when the controller is done and the control loop
// is exited.
//
// Call n.Err() to find out if there was an error.
func (n *NodeController) Done() <-chan struct{} { return n.run.done }

// Err returns any errors that have occurred that trigger the control loop to
// exit.
//
// Err only returns a non-nil error after `<-n.Done()` returns.
func (n *NodeController) Err() error {
	select {
	case <-n.run.done:
	default:
		return nil
	}
	return n.run.result()
}

// Run registers the node in kubernetes and starts loops for updating the node
// status in Kubernetes.
//
// The node status must be updated periodically in Kubernetes to keep the node
// active. With leases enabled, the lease is the heartbeat, renewed often,
// and the full status is written at the slower status interval; without, the
// status is written at the ping interval. A heartbeat is sent only while the
// provider answers Ping, so an unhealthy provider makes the node NotReady.
//
// Every write is a server-side apply under FieldManager (taints aside, see
// TaintsAnnotation): what the provider stops reporting is removed from the
// Node, and what others set on it is kept.
//
// Run blocks until ctx ends or the error handler returns an error. A node
// deleted from the API server meanwhile is registered again, and a
// condition of the provider's that someone else changed (the node
// lifecycle controller's Ready Unknown after missed heartbeats) is written
// back as soon as the provider answers Ping.
func (n *NodeController) Run(ctx context.Context) (retErr error) {
	if err := n.run.start("node controller"); err != nil {
		return err
	}
	defer func() { n.run.finish(retErr) }()

	ctx = log.WithFields(ctx, map[string]any{"node": n.name})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	n.p.NotifyNodeStatus(ctx, n.onProviderStatus)

	if err := n.register(ctx); err != nil {
		return err
	}

	if n.watch != nil {
		defer n.watch.Subscribe(n.name, n.observed)()
	} else {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.watchNode(ctx)
		}()
	}

	close(n.ready)
	return n.controlLoop(ctx)
}

// Node returns the node as this controller keeps it: the one it was given,
// or the one the provider last reported through NotifyNodeStatus. It is
// shared: callers must not modify it.
func (n *NodeController) Node() *corev1.Node { return n.reported.Load() }

// onProviderStatus keeps only the newest node the provider reported; the
// control loop writes it.
func (n *NodeController) onProviderStatus(node *corev1.Node) {
	node = node.DeepCopy()
	for {
		select {
		case n.statusUpdates <- node:
			return
		default:
		}
		select {
		case <-n.statusUpdates:
		default:
		}
	}
}

// setDesired takes the provider's node as the one to write: its labels
// (those NodeRestriction allows, see NodeLabelGuard), annotations, spec and
// status. It reports whether more than the status changed, which takes
// more than a status write.
func (n *NodeController) setDesired(ctx context.Context, node *corev1.Node) (objectChanged bool) {
	next := n.desired.DeepCopy()
	next.Labels = n.labels.Restrict(ctx, n.desired.Labels, node.Labels)
	next.Annotations, next.Spec, next.Status = node.Annotations, node.Spec, node.Status
	keepTransitionTimes(n.desired.Status.Conditions, next.Status.Conditions)
	objectChanged = !apiequality.Semantic.DeepEqual(n.desired.Labels, next.Labels) ||
		!apiequality.Semantic.DeepEqual(n.desired.Annotations, next.Annotations) ||
		!apiequality.Semantic.DeepEqual(n.desired.Spec, next.Spec)
	n.setNode(next)
	return objectChanged
}

// setNode makes node the desired one.
func (n *NodeController) setNode(node *corev1.Node) {
	n.desired = node
	n.reported.Store(node)
}

// withConditions makes the desired node one with its conditions changed by
// change, which gets a copy of them.
func (n *NodeController) withConditions(change func([]corev1.NodeCondition)) {
	next := *n.desired
	next.Status.Conditions = slices.Clone(n.desired.Status.Conditions)
	change(next.Status.Conditions)
	n.setNode(&next)
}

func (n *NodeController) controlLoop(ctx context.Context) error {
	ping := time.NewTicker(n.pingInterval)
	defer ping.Stop()

	// Without leases the status is the heartbeat, written at the ping
	// interval; with them, the lease is renewed at its own interval.
	var renew, status <-chan time.Time
	if n.leases != nil {
		r := time.NewTicker(n.renewInterval)
		defer r.Stop()
		renew = r.C
		s := time.NewTicker(n.statusInterval)
		defer s.Stop()
		status = s.C
	}

	healthy := true
	// stale: a condition of ours was overwritten and is not written back
	// yet. That waits for a healthy provider, and a failed write is tried
	// again at the next tick.
	stale := false
	for {
		if stale && healthy {
			var err error
			if stale, err = n.mendStatus(ctx); err != nil {
				return err
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-ping.C:
			healthy = n.ping(ctx)
			if n.leases == nil && healthy {
				if err := n.writeStatus(ctx); err != nil {
					return err
				}
			}
		case <-renew:
			if healthy {
				n.renewLease(ctx)
			}
		case <-status:
			// The periodic write refreshes the conditions' heartbeats: an
			// unhealthy provider gets none, so the node goes NotReady.
			if !healthy {
				continue
			}
			if err := n.writeStatus(ctx); err != nil {
				return err
			}
		case node := <-n.statusUpdates:
			write := n.writeStatus
			if n.setDesired(ctx, node) {
				write = n.writeNode
			}
			if err := write(ctx); err != nil {
				return err
			}
		case <-n.nodeStale:
			stale = true
		case <-n.nodeDeleted:
			if n.existing {
				return fmt.Errorf("node %s: %w", n.name, ErrNodeDeleted)
			}
			log.G(ctx).Warn("node was deleted from the API server; registering it again")
			if err := n.register(ctx); err != nil {
				log.G(ctx).WithError(err).Error("registering the node again")
			}
		}
	}
}

func (n *NodeController) ping(ctx context.Context) bool {
	ctx, span := trace.StartSpan(ctx, "node.ping")
	defer span.End()
	ctx, cancel := context.WithTimeout(ctx, n.pingTimeout)
	defer cancel()
	if err := n.p.Ping(ctx); err != nil {
		span.SetStatus(err)
		log.G(ctx).WithError(err).Warn("provider ping failed; not sending heartbeats")
		return false
	}
	return true
}
