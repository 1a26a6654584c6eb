package kubernetes

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"

	"github.com/vkubelet/virtual-kubelet/internal/provider"
	"github.com/vkubelet/virtual-kubelet/node"
)

var _ node.NodeProvider = (*Provider)(nil)

// Ping asks B's API server whether it is ready (/readyz). While it fails
// the node controller stops the heartbeat, so A marks the node NotReady;
// nothing is deleted in B.
func (p *Provider) Ping(ctx context.Context) error {
	_, err := p.remote.Discovery().RESTClient().Get().AbsPath("/readyz").DoRaw(ctx)
	if err != nil {
		return fmt.Errorf("remote cluster not ready: %w", err)
	}
	return nil
}

// NotifyNodeStatus implements node.NodeProvider. The node's status is the
// one the daemon registers; the capacity is settled at start (see
// Config.DeriveCapacity), so there is nothing to push.
func (p *Provider) NotifyNodeStatus(context.Context, func(*corev1.Node)) {}

// remoteCapacity is what B can still take: the allocatable of its
// schedulable nodes minus the requests of the pods bound there that have not
// finished.
func (p *Provider) remoteCapacity(ctx context.Context) (corev1.ResourceList, error) {
	nodes, err := p.remote.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil {
		return nil, fmt.Errorf("deriveCapacity: listing the remote cluster's nodes: %w", err)
	}
	total := corev1.ResourceList{}
	for _, n := range nodes.Items {
		if n.Spec.Unschedulable {
			continue
		}
		for name, q := range n.Status.Allocatable {
			add(total, name, q, 1)
		}
	}
	pods, err := p.remote.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		FieldSelector: fields.AndSelectors(
			fields.OneTermNotEqualSelector("spec.nodeName", ""),
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed))).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("deriveCapacity: listing the remote cluster's pods: %w", err)
	}
	for _, pod := range pods.Items {
		for _, c := range pod.Spec.Containers {
			for name, q := range c.Resources.Requests {
				add(total, name, q, -1)
			}
		}
		add(total, corev1.ResourcePods, resource.MustParse("1"), -1)
	}
	for name, q := range total {
		if q.Sign() < 0 {
			total[name] = resource.MustParse("0")
		}
	}
	return total, nil
}

func add(list corev1.ResourceList, name corev1.ResourceName, q resource.Quantity, sign int) {
	sum := list[name]
	if sign < 0 {
		sum.Sub(q)
	} else {
		sum.Add(q)
	}
	list[name] = sum
}

// Capacity implements provider.Provider.
func (p *Provider) Capacity(context.Context) corev1.ResourceList { return p.capacity.DeepCopy() }

// NodeConditions reports the node Ready: while B does not answer Ping the
// heartbeat stops and A's node lifecycle controller says otherwise.
func (p *Provider) NodeConditions(context.Context) []corev1.NodeCondition {
	return provider.HealthyConditions(p.startedAt, "the remote cluster")
}

// NodeLabels implements provider.NodeDecorator: the config's node.labels.
func (p *Provider) NodeLabels() map[string]string { return p.cfg.Node.Labels }

// NodeTaints implements provider.NodeDecorator: the config's node.taints.
func (p *Provider) NodeTaints() []corev1.Taint { return p.cfg.Node.Taints }
