package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	coordclientset "k8s.io/client-go/kubernetes/typed/coordination/v1"
	v1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/retry"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace"
)

const (
	// DefaultPingInterval is how often the provider is pinged, and, without
	// leases, how often the node status is written.
	DefaultPingInterval = 10 * time.Second
	// DefaultStatusUpdateInterval is how often the full node status is
	// written when leases carry the heartbeat.
	DefaultStatusUpdateInterval = 1 * time.Minute
)

const (
	// DefaultRenewIntervalFraction is the fraction of lease duration to renew the lease
	DefaultRenewIntervalFraction = 0.25
	// DefaultLeaseDuration is from upstream kubelet, where the default lease duration is 40 seconds
	DefaultLeaseDuration = 40
)

// ErrConflictingLeaseControllerConfiguration is returned when the lease
// controller related options have been specified multiple times.
var ErrConflictingLeaseControllerConfiguration = errors.New("multiple, conflicting lease configurations have been put into place")

var errNotCreatedWithConstructor = errors.New("NaiveNodeProviderV2 must be created with NewNaiveNodeProvider to send status updates")

// NodeController deals with creating and managing a node object in
// Kubernetes. It can register a node with Kubernetes and periodically update
// its status. NodeController manages a single node entity.
type NodeController struct { //nolint:revive
	p     NodeProvider
	nodes v1.NodeInterface
	// name of the Node; the provider's updates cannot change it.
	name string

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
	// loop goroutine touches it once Run has started.
	desired *corev1.Node
	// reported is a copy of desired for readers outside the control loop.
	reported atomic.Pointer[corev1.Node]
	// uid of the registered Node, owner of the lease.
	uid types.UID

	statusUpdates chan *corev1.Node
	nodeDeleted   chan struct{}
	deletions     NodeDeletions

	started bool
	ready   chan struct{}
	done    chan struct{}
	mu      sync.Mutex
	err     error
}

// NodeControllerOpt are the functional options used for configuring a node.
type NodeControllerOpt func(*NodeController) error //nolint:revive

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
		ready:          make(chan struct{}),
		done:           make(chan struct{}),
	}
	n.reported.Store(n.desired.DeepCopy())
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

// WithNodeEnableLeaseV1 enables support for v1 leases. V1 Leases share all the
// same properties as v1beta1 leases, except they do not fallback like the
// v1beta1 lease controller does if the API server does not support it. If the
// lease duration is not specified (0) then DefaultLeaseDuration will be used.
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

// Ready returns a channel that gets closed when the node is fully up and
// running. Note that if there is an error on startup this channel will never
// be closed.
func (n *NodeController) Ready() <-chan struct{} { return n.ready }

// Done signals to the caller when the controller is done and the control loop
// is exited.
//
// Call n.Err() to find out if there was an error.
func (n *NodeController) Done() <-chan struct{} { return n.done }

// Err returns any errors that have occurred that trigger the control loop to
// exit.
//
// Err only returns a non-nil error after `<-n.Done()` returns.
func (n *NodeController) Err() error {
	select {
	case <-n.done:
	default:
		return nil
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.err
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
// deleted from the API server meanwhile is registered again.
func (n *NodeController) Run(ctx context.Context) (retErr error) {
	n.mu.Lock()
	if n.started {
		n.mu.Unlock()
		return errors.New("node controller: Run was already called")
	}
	n.started = true
	n.mu.Unlock()

	defer func() {
		n.mu.Lock()
		n.err = retErr
		n.mu.Unlock()
		close(n.done)
	}()

	ctx = log.WithFields(ctx, map[string]any{"node": n.name})
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	n.p.NotifyNodeStatus(ctx, n.onProviderStatus)

	if err := n.register(ctx); err != nil {
		return err
	}

	if n.deletions != nil {
		defer n.deletions.Subscribe(n.name, n.signalDeleted)()
	} else {
		var wg sync.WaitGroup
		defer wg.Wait()
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.watchDeletion(ctx)
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

// setDesired takes the provider's node as the one to write: its labels,
// annotations, spec and status. It reports whether more than the status
// changed, which takes more than a status write.
func (n *NodeController) setDesired(node *corev1.Node) (objectChanged bool) {
	next := n.desired.DeepCopy()
	next.Labels, next.Annotations, next.Spec, next.Status = node.Labels, node.Annotations, node.Spec, node.Status
	keepTransitionTimes(n.desired.Status.Conditions, next.Status.Conditions)
	objectChanged = !apiequality.Semantic.DeepEqual(n.desired.Labels, next.Labels) ||
		!apiequality.Semantic.DeepEqual(n.desired.Annotations, next.Annotations) ||
		!apiequality.Semantic.DeepEqual(n.desired.Spec, next.Spec)
	n.desired = next
	n.reported.Store(next.DeepCopy())
	return objectChanged
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
	for {
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
			if n.setDesired(node) {
				write = n.writeNode
			}
			if err := write(ctx); err != nil {
				return err
			}
		case <-n.nodeDeleted:
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

// register applies the node (creating it, or adopting an existing one), its
// status and its lease. It retries until it succeeds or ctx ends: a daemon
// started before the API server is reachable should come up once it is.
func (n *NodeController) register(ctx context.Context) error {
	ctx, span := trace.StartSpan(ctx, "node.register")
	defer span.End()
	backoff := time.Second
	for {
		err := n.registerOnce(ctx)
		if err == nil {
			return nil
		}
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) {
			return fmt.Errorf("registering node %s: %w", n.name, err)
		}
		log.G(ctx).WithError(err).Warnf("registering the node failed; retrying in %s", backoff)
		select {
		case <-ctx.Done():
			return fmt.Errorf("registering node %s: %w", n.name, err)
		case <-time.After(backoff):
		}
		backoff = min(2*backoff, 30*time.Second)
	}
}

func (n *NodeController) registerOnce(ctx context.Context) error {
	existing, err := n.applyObject(ctx)
	if err != nil {
		return err
	}
	// After a restart the conditions keep the transition times the API
	// server has, as long as their status is the same.
	keepTransitionTimes(existing.Status.Conditions, n.desired.Status.Conditions)
	if err := n.applyStatus(ctx); err != nil {
		return err
	}
	log.G(ctx).WithField("uid", n.uid).Info("registered node")
	if n.leases != nil {
		return n.ensureLease(ctx)
	}
	return nil
}

// FieldManager is the field manager of the NodeController's writes to its
// Node. Server-side apply records, under this name, which labels,
// annotations, spec fields, capacity entries, conditions and addresses the
// provider set: one it stops setting is removed, and fields that other
// managers own (a user's labels, cordon, the control plane's taints and
// conditions) are left alone.
const FieldManager = "virtual-kubelet"

// TaintsAnnotation lists, as JSON, the taints the NodeController set on its
// Node. Taints are one atomic list to server-side apply, so ownership of
// single taints cannot be recorded there; this annotation lets a taint the
// provider no longer wants be removed, even after a restart, while the
// control plane's and users' taints stay.
const TaintsAnnotation = "virtual-kubelet.io/taints"

// applyOptions take over fields another manager changed: the node's
// labels, spec and status that the provider sets are ours, as the kubelet's
// are its own.
var applyOptions = metav1.ApplyOptions{FieldManager: FieldManager, Force: true}

// applyObject applies the desired labels, annotations and spec, creating the
// Node if there is none, then its taints. It returns the Node as written.
func (n *NodeController) applyObject(ctx context.Context) (*corev1.Node, error) {
	spec := n.desired.Spec.DeepCopy()
	spec.Taints = nil // written by writeTaints
	specApply, err := asApplyConfiguration[corev1ac.NodeSpecApplyConfiguration](spec)
	if err != nil {
		return nil, err
	}
	annotations := n.desired.Annotations
	if _, ok := annotations[TaintsAnnotation]; ok {
		// writeTaints keeps it; a provider that copied it from the Node
		// would fight that write with a stale value.
		annotations = maps.Clone(annotations)
		delete(annotations, TaintsAnnotation)
	}
	obj := corev1ac.Node(n.name).
		WithLabels(n.desired.Labels).
		WithAnnotations(annotations).
		WithSpec(specApply)
	written, err := n.nodes.Apply(ctx, obj, applyOptions)
	if err != nil {
		return nil, err
	}
	n.uid = written.UID
	return n.writeTaints(ctx, written)
}

// writeTaints brings the Node's taints in line with the desired ones: ours
// are added or updated, those we set before and no longer want are removed,
// and every other taint is kept. A write only happens on a change, and is
// retried on a conflict with a fresh read.
func (n *NodeController) writeTaints(ctx context.Context, node *corev1.Node) (*corev1.Node, error) {
	want := n.desired.Spec.Taints
	record, err := taintsRecord(want)
	if err != nil {
		return nil, err
	}
	// The last attempt's error is kept: RetryOnConflict reports none for an
	// error that wraps context.Canceled (shutdown), and the caller would
	// get no node and no error.
	var last error
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		node, last = n.writeTaintsOnce(ctx, node, want, record)
		return last
	})
	if err == nil {
		err = last
	}
	if err != nil {
		return nil, err
	}
	return node, nil
}

// writeTaintsOnce is one attempt of writeTaints, from node (read when nil).
// It returns the Node as it now is, or nil with the error.
func (n *NodeController) writeTaintsOnce(ctx context.Context, node *corev1.Node, want []corev1.Taint, record string) (*corev1.Node, error) {
	if node == nil {
		var err error
		if node, err = n.nodes.Get(ctx, n.name, metav1.GetOptions{}); err != nil {
			return nil, err
		}
	}
	var before []corev1.Taint
	if v, ok := node.Annotations[TaintsAnnotation]; ok {
		if err := json.Unmarshal([]byte(v), &before); err != nil {
			log.G(ctx).WithError(err).Warnf("ignoring unreadable annotation %s", TaintsAnnotation)
		}
	}
	taints := reconcileTaints(node.Spec.Taints, before, want)
	if apiequality.Semantic.DeepEqual(taints, node.Spec.Taints) && node.Annotations[TaintsAnnotation] == record {
		return node, nil
	}
	update := node.DeepCopy()
	update.Spec.Taints = taints
	if record == "" {
		delete(update.Annotations, TaintsAnnotation)
	} else {
		if update.Annotations == nil {
			update.Annotations = map[string]string{}
		}
		update.Annotations[TaintsAnnotation] = record
	}
	written, err := n.nodes.Update(ctx, update, metav1.UpdateOptions{FieldManager: FieldManager})
	if err != nil {
		return nil, err // read again on a retry
	}
	return written, nil
}

// taintsRecord is the TaintsAnnotation value for taints; none is "".
func taintsRecord(taints []corev1.Taint) (string, error) {
	if len(taints) == 0 {
		return "", nil
	}
	b, err := json.Marshal(taints)
	return string(b), err
}

// reconcileTaints returns have without the taints in before that are not in
// want, and with every taint of want present (matched by key and effect,
// with want's value). Other taints keep their place.
func reconcileTaints(have, before, want []corev1.Taint) []corev1.Taint {
	var out []corev1.Taint
	for _, t := range have {
		if slices.ContainsFunc(before, sameTaint(t)) && !slices.ContainsFunc(want, sameTaint(t)) {
			continue
		}
		out = append(out, t)
	}
	for _, w := range want {
		if i := slices.IndexFunc(out, sameTaint(w)); i >= 0 {
			out[i].Value = w.Value
			continue
		}
		out = append(out, w)
	}
	return out
}

// sameTaint matches taints with t's key and effect.
func sameTaint(t corev1.Taint) func(corev1.Taint) bool {
	return func(o corev1.Taint) bool { return t.MatchTaint(&o) }
}

// keepTransitionTimes gives each condition of to that has no transition
// time the one its type has in from, if its status is the same there: a
// transition time moves only when the status changes.
func keepTransitionTimes(from, to []corev1.NodeCondition) {
	for i := range to {
		c := &to[i]
		if !c.LastTransitionTime.IsZero() {
			continue
		}
		for _, f := range from {
			if f.Type == c.Type && f.Status == c.Status {
				c.LastTransitionTime = f.LastTransitionTime
			}
		}
	}
}

// touchConditions stamps every condition with a fresh heartbeat, as the
// kubelet does on each status write; a condition with no transition time
// gets one now.
func (n *NodeController) touchConditions() {
	now := metav1.Now()
	for i := range n.desired.Status.Conditions {
		c := &n.desired.Status.Conditions[i]
		c.LastHeartbeatTime = now
		if c.LastTransitionTime.IsZero() {
			c.LastTransitionTime = now
		}
	}
}

// writeNode writes the whole node: object, taints and status. It returns an
// error only when Run must stop.
func (n *NodeController) writeNode(ctx context.Context) error {
	ctx, span := trace.StartSpan(ctx, "node.update")
	defer span.End()
	uid := n.uid
	_, err := n.applyObject(ctx)
	if err == nil && n.uid != uid && n.leases != nil {
		// Someone deleted the node and the apply made it again: the lease
		// belongs to the new one.
		err = n.ensureLease(ctx)
	}
	if err == nil {
		err = n.applyStatus(ctx)
	}
	return n.handleWriteError(ctx, span, "updating node", err)
}

// writeStatus writes the desired status and hands errors to the error
// handler. It returns an error only when Run must stop.
func (n *NodeController) writeStatus(ctx context.Context) error {
	ctx, span := trace.StartSpan(ctx, "node.updateStatus")
	defer span.End()
	return n.handleWriteError(ctx, span, "updating node status", n.applyStatus(ctx))
}

// handleWriteError hands a failed write to the error handler or, without
// one, registers a node that is gone again and logs other errors, to be
// retried at the next write.
func (n *NodeController) handleWriteError(ctx context.Context, span trace.Span, what string, err error) error {
	if err == nil {
		return nil
	}
	span.SetStatus(err)
	if n.errorHandler != nil {
		if herr := n.errorHandler(ctx, err); herr != nil {
			return fmt.Errorf("%s: %w", what, herr)
		}
		return nil
	}
	if apierrors.IsNotFound(err) {
		log.G(ctx).Warn("node is gone from the API server; registering it again")
		if err := n.register(ctx); err != nil && ctx.Err() == nil {
			log.G(ctx).WithError(err).Error("registering the node again")
		}
		return nil
	}
	log.G(ctx).WithError(err).Error(what)
	return nil
}

// applyStatus applies the whole desired status, with fresh heartbeats, to
// the status subresource: one request, no read. The UID makes it fail,
// rather than write, if the Node is another one by now; a Node that is gone
// is not created again by it (NotFound).
//
// Addresses with two of one type (a dual-stack node's two InternalIPs)
// cannot be applied: server-side apply keys them by type and rejects
// duplicates. Those are written after the apply, whole, by a JSON merge
// patch, which replaces the list: a second request, only for such nodes.
func (n *NodeController) applyStatus(ctx context.Context) error {
	n.touchConditions()
	applied := &n.desired.Status
	addresses := n.desired.Status.Addresses
	patchAddresses := hasDuplicateTypes(addresses)
	if patchAddresses {
		applied = applied.DeepCopy()
		applied.Addresses = nil
	}
	status, err := asApplyConfiguration[corev1ac.NodeStatusApplyConfiguration](applied)
	if err != nil {
		return err
	}
	obj := corev1ac.Node(n.name).WithUID(n.uid).WithStatus(status)
	if _, err = n.nodes.ApplyStatus(ctx, obj, applyOptions); err != nil || !patchAddresses {
		return err
	}
	patch, err := json.Marshal(map[string]any{
		"metadata": map[string]any{"uid": n.uid},
		"status":   map[string]any{"addresses": addresses},
	})
	if err != nil {
		return err
	}
	_, err = n.nodes.Patch(ctx, n.name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: FieldManager}, "status")
	return err
}

// hasDuplicateTypes tells whether two addresses have the same type.
func hasDuplicateTypes(addresses []corev1.NodeAddress) bool {
	seen := make(map[corev1.NodeAddressType]bool, len(addresses))
	for _, a := range addresses {
		if seen[a.Type] {
			return true
		}
		seen[a.Type] = true
	}
	return false
}

// asApplyConfiguration converts an API struct into its apply configuration
// through JSON: exactly the fields it sets (not the zero ones JSON leaves
// out) are in the result, so fields added to the API later are applied too.
func asApplyConfiguration[T any](v any) (*T, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	out := new(T)
	if err := json.Unmarshal(b, out); err != nil {
		return nil, fmt.Errorf("converting %T to an apply configuration: %w", v, err)
	}
	return out, nil
}

func (n *NodeController) leaseObject(renew time.Time) *coordinationv1.Lease {
	holder := n.name
	duration := n.leaseDuration
	renewTime := metav1.NewMicroTime(renew)
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: n.name,
			// The lease goes with the node, as the kubelet's does.
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "v1",
				Kind:       "Node",
				Name:       n.name,
				UID:        n.uid,
			}},
		},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       &holder,
			LeaseDurationSeconds: &duration,
			RenewTime:            &renewTime,
		},
	}
}

// ensureLease creates the node's lease, or takes over an existing one.
func (n *NodeController) ensureLease(ctx context.Context) error {
	want := n.leaseObject(time.Now())
	created, err := n.leases.Create(ctx, want, metav1.CreateOptions{})
	if err == nil {
		n.lease = created
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	n.lease = nil
	return n.updateLease(ctx)
}

// updateLease renews the lease, fixing its holder, duration and owner on the
// way. Like the kubelet, it writes over the copy its last write returned and
// reads the lease only when it has no copy or the copy is stale: an idle
// node costs one request per renewal.
func (n *NodeController) updateLease(ctx context.Context) error {
	for {
		cached := n.lease
		existing := cached
		if existing == nil {
			got, err := n.leases.Get(ctx, n.name, metav1.GetOptions{})
			if err != nil {
				return err
			}
			existing = got
		}
		update := existing.DeepCopy()
		want := n.leaseObject(time.Now())
		update.Spec.HolderIdentity = want.Spec.HolderIdentity
		update.Spec.LeaseDurationSeconds = want.Spec.LeaseDurationSeconds
		update.Spec.RenewTime = want.Spec.RenewTime
		update.OwnerReferences = want.OwnerReferences
		updated, err := n.leases.Update(ctx, update, metav1.UpdateOptions{})
		if err == nil {
			n.lease = updated
			return nil
		}
		n.lease = nil
		if cached == nil || !apierrors.IsConflict(err) {
			return err
		}
		// Someone else wrote the lease since: read it and try once more.
	}
}

// renewLease is one heartbeat. A lease that is gone is created again (the
// garbage collector removes it with a deleted node).
func (n *NodeController) renewLease(ctx context.Context) {
	ctx, span := trace.StartSpan(ctx, "node.renewLease")
	defer span.End()
	err := n.updateLease(ctx)
	if apierrors.IsNotFound(err) {
		err = n.ensureLease(ctx)
	}
	if err != nil {
		span.SetStatus(err)
		log.G(ctx).WithError(err).Warn("renewing the node lease failed")
	}
}

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

// WithNodeDeletions makes the controller learn of its Node's deletion from
// d instead of from a watch of its own.
func WithNodeDeletions(d NodeDeletions) NodeControllerOpt {
	return func(n *NodeController) error {
		n.deletions = d
		return nil
	}
}
