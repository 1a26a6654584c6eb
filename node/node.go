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

	"github.com/vkubelet/virtual-kubelet/node/intern"
	"github.com/vkubelet/virtual-kubelet/node/internal/runonce"
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

	// interner shares what the desired node repeats with other nodes'
	// (WithNodeInterner); nil: nothing is shared.
	interner *intern.Interner

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
	// loop changes it once Run has started, and never in place:
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

	watch NodeWatch

	// loop says what the control loop has to do and who runs it; cycle is
	// the state of the loop (see node_loop.go).
	loop  loop
	cycle cycle

	ready chan struct{}
	run   *runonce.Once
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
		ready:          make(chan struct{}),
		run:            runonce.New(),
	}
	// Start's goroutine holds the loop until the node is registered: what
	// comes before waits for it.
	n.loop.running = true
	n.reported.Store(n.desired)
	n.labels = NewNodeLabelGuard(n.name)
	for _, o := range opts {
		if err := o(n); err != nil {
			return nil, err
		}
	}
	if n.interner != nil {
		// Our own copy: sharing its values changes nobody else's.
		n.interner.Node(n.desired)
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
func (n *NodeController) Done() <-chan struct{} { return n.run.Done() }

// AfterStop arranges for f to run on a goroutine of its own once the
// controller has stopped (Done is closed), or at once if it has, so that a
// process with many nodes need not keep a goroutine waiting on each.
func (n *NodeController) AfterStop(f func()) { n.run.AfterFinish(f) }

// Err returns any errors that have occurred that trigger the control loop to
// exit.
//
// Err only returns a non-nil error after `<-n.Done()` returns.
func (n *NodeController) Err() error {
	select {
	case <-n.run.Done():
	default:
		return nil
	}
	return n.run.Result()
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
func (n *NodeController) Run(ctx context.Context) error {
	if err := n.Start(ctx); err != nil {
		return err
	}
	<-n.Done()
	return n.run.Result()
}

// Start does what Run does, but returns at once: Ready is closed once the
// node is registered, and Done once the controller has stopped, Err
// saying why. Between its writes, the controller holds no goroutine of its
// own, only timers.
func (n *NodeController) Start(ctx context.Context) error {
	if err := n.run.Start("node controller"); err != nil {
		return err
	}
	go n.start(ctx)
	return nil
}

// start registers the node, then runs the loop until nothing is pending.
func (n *NodeController) start(ctx context.Context) {
	ctx = log.WithFields(ctx, map[string]any{"node": n.name})
	ctx, cancel := context.WithCancel(ctx)
	c := &n.cycle
	c.ctx, c.cancel = ctx, cancel

	n.p.NotifyNodeStatus(ctx, n.onProviderStatus)

	if err := n.register(ctx); err != nil {
		n.stop(err)
		return
	}
	if n.watch != nil {
		c.release = append(c.release, n.watch.Subscribe(n.name, n.observed))
	} else {
		var wg sync.WaitGroup
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.watchNode(ctx)
		}()
		c.release = append(c.release, wg.Wait) // after cancel, see stop
	}

	close(n.ready)
	n.arm(ctx)
	n.drain()
}

// Node returns the node as this controller keeps it: the one it was given,
// or the one the provider last reported through NotifyNodeStatus. It is
// shared: callers must not modify it.
func (n *NodeController) Node() *corev1.Node { return n.reported.Load() }

// onProviderStatus keeps only the newest node the provider reported; the
// control loop writes it.
func (n *NodeController) onProviderStatus(node *corev1.Node) {
	n.post(evUpdate, node.DeepCopy())
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
