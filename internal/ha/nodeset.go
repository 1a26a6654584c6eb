package ha

import (
	"context"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// AddNode adds node to the nodes the replicas share, for a node set that
// changes while they run (Nodes that others create and the daemon
// manages): every replica adds the nodes it sees, and each then holds,
// with Hold, those it is preferred for. Nodes added are assigned after
// Config.Nodes, in name order, so that replicas that saw them appear in
// another order agree on the assignment.
func (m *Members) AddNode(node string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, found := slices.BinarySearch(m.added, node); !found {
		m.added = slices.Insert(m.added, i, node)
		m.assignedTo = nil
	}
}

// RemoveNode takes node, added by AddNode, out of the shared nodes; its
// Hold should have ended.
func (m *Members) RemoveNode(node string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if i, found := slices.BinarySearch(m.added, node); found {
		m.added = slices.Delete(m.added, i, i+1)
		m.assignedTo = nil
	}
}

// nodes are the shared nodes: Config.Nodes, then those added. m.mu is held.
func (m *Members) nodes() []string {
	if len(m.added) == 0 {
		return m.cfg.Nodes
	}
	return append(slices.Clip(m.cfg.Nodes), m.added...)
}

// Identity is this replica's name among the replicas.
func (m *Members) Identity() string { return m.cfg.Identity }

// DeleteHolderLease deletes node's holder lease, once the node is gone for
// good and its Hold has ended: the lease would otherwise outlive it.
func (m *Members) DeleteHolderLease(ctx context.Context, node string) {
	err := m.cfg.Client.CoordinationV1().Leases(m.cfg.Namespace).Delete(ctx, HolderLeaseName(node), metav1.DeleteOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		log.G(ctx).WithError(err).WithField("node", node).Warn("deleting the holder lease of a node that is gone")
	}
}
