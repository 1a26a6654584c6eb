package node

import (
	"context"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace"
)

const (
	// DefaultRenewIntervalFraction is the fraction of lease duration to renew the lease
	DefaultRenewIntervalFraction = 0.25
	// DefaultLeaseDuration is from upstream kubelet, where the default lease duration is 40 seconds
	DefaultLeaseDuration = 40
)

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
		n.keepLease(created)
		return nil
	}
	if !apierrors.IsAlreadyExists(err) {
		return err
	}
	n.lease = nil
	return n.updateLease(ctx)
}

// keepLease keeps l, as written, for the next renewal, without its managed
// fields: an update that leaves them out keeps the API server's, and a
// thousand nodes need not hold a copy each.
func (n *NodeController) keepLease(l *coordinationv1.Lease) {
	l.ManagedFields = nil
	n.lease = l
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
			n.keepLease(updated)
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
