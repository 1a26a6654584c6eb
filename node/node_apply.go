package node

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace"
)

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
		if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || n.existingGone(err) {
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
	n.withConditions(func(c []corev1.NodeCondition) { keepTransitionTimes(existing.Status.Conditions, c) })
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

// applyOptions take over fields another manager changed: the node's
// labels, spec and status that the provider sets are ours, as the kubelet's
// are its own.
var applyOptions = metav1.ApplyOptions{FieldManager: FieldManager, Force: true}

// applyObject applies the desired labels, annotations and spec, creating the
// Node if there is none, then its taints. It returns the Node as written.
func (n *NodeController) applyObject(ctx context.Context) (*corev1.Node, error) {
	if n.existing {
		return n.adoptObject(ctx)
	}
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
	n.withConditions(func(conditions []corev1.NodeCondition) {
		for i := range conditions {
			c := &conditions[i]
			c.LastHeartbeatTime = now
			if c.LastTransitionTime.IsZero() {
				c.LastTransitionTime = now
			}
		}
	})
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

// mendStatus writes the status back after someone else changed a condition
// of ours. It reports whether that is still to be done: the write failed.
func (n *NodeController) mendStatus(ctx context.Context) (stale bool, err error) {
	ctx, span := trace.StartSpan(ctx, "node.mendStatus")
	defer span.End()
	werr := n.applyStatus(ctx)
	return werr != nil, n.handleWriteError(ctx, span, "writing the node status back", werr)
}

// handleWriteError hands a failed write to the error handler or, without
// one, registers a node that is gone again and logs other errors, to be
// retried at the next write.
func (n *NodeController) handleWriteError(ctx context.Context, span trace.Span, what string, err error) error {
	if err == nil {
		return nil
	}
	span.SetStatus(err)
	if n.existingGone(err) {
		return fmt.Errorf("%s: %w", what, ErrNodeDeleted)
	}
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
