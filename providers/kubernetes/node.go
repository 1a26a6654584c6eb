package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"
	"k8s.io/apimachinery/pkg/util/wait"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/provider"
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

// NotifyNodeStatus implements node.NodeProvider. The node is the one the
// daemon registers; a derived capacity changes it, through NotifyCapacity.
func (p *Provider) NotifyNodeStatus(context.Context, func(*corev1.Node)) {}

// capacityRefreshInterval is how often a derived capacity is computed
// again. Both lists are served from B's watch cache.
const capacityRefreshInterval = 30 * time.Second

// NotifyCapacity implements node.CapacityNotifier: with deriveCapacity
// it computes B's capacity every capacityRefreshInterval and calls f when
// it changed. A failed computation keeps the last capacity (B is away: Ping
// says so).
func (p *Provider) NotifyCapacity(ctx context.Context, f func(corev1.ResourceList)) {
	if !p.cfg.DeriveCapacity {
		return
	}
	go wait.UntilWithContext(ctx, func(ctx context.Context) {
		capacity, err := p.remoteCapacity(ctx)
		if err != nil {
			log.G(ctx).WithError(err).Warn("kubernetes: capacity not refreshed")
			return
		}
		p.mu.Lock()
		changed := !apiequality.Semantic.DeepEqual(capacity, p.capacity)
		p.capacity = capacity
		p.mu.Unlock()
		if changed {
			f(capacity.DeepCopy())
		}
	}, capacityRefreshInterval)
}

// remoteCapacity is what B can take for this node: the allocatable of its
// schedulable nodes minus the requests of the pods bound there that have
// not finished, except this node's own, which A's scheduler already counts
// against this node's capacity.
func (p *Provider) remoteCapacity(ctx context.Context) (corev1.ResourceList, error) {
	nodes, err := p.remote.CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return nil, fmt.Errorf("deriveCapacity: listing the remote cluster's nodes: %w", err)
	}
	notOurs, err := labels.NewRequirement(LabelNode, selection.NotEquals, []string{p.nodeName})
	if err != nil {
		return nil, fmt.Errorf("deriveCapacity: %w", err)
	}
	pods, err := p.remote.CoreV1().Pods("").List(ctx, metav1.ListOptions{
		ResourceVersion: "0",
		LabelSelector:   labels.NewSelector().Add(*notOurs).String(),
		FieldSelector: fields.AndSelectors(
			fields.OneTermNotEqualSelector("spec.nodeName", ""),
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodSucceeded)),
			fields.OneTermNotEqualSelector("status.phase", string(corev1.PodFailed))).String(),
	})
	if err != nil {
		return nil, fmt.Errorf("deriveCapacity: listing the remote cluster's pods: %w", err)
	}
	return freeCapacity(p.nodeName, nodes.Items, pods.Items), nil
}

// freeCapacity is the allocatable of the schedulable nodes minus the
// requests of the pods bound to them that have not finished and are not
// those of the virtual node nodeName; never below zero.
func freeCapacity(nodeName string, nodes []corev1.Node, pods []corev1.Pod) corev1.ResourceList {
	total := corev1.ResourceList{}
	for _, n := range nodes {
		if n.Spec.Unschedulable {
			continue
		}
		for name, q := range n.Status.Allocatable {
			add(total, name, q, 1)
		}
	}
	one := resource.MustParse("1")
	for i := range pods {
		pod := &pods[i]
		if pod.Spec.NodeName == "" || pod.Labels[LabelNode] == nodeName ||
			pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		for name, q := range resourcehelper.PodRequests(pod, resourcehelper.PodResourcesOptions{}) {
			add(total, name, q, -1)
		}
		add(total, corev1.ResourcePods, one, -1)
	}
	for name, q := range total {
		if q.Sign() < 0 {
			total[name] = resource.MustParse("0")
		}
	}
	return total
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

// Capacity implements node.Provider.
func (p *Provider) Capacity(context.Context) corev1.ResourceList {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.capacity.DeepCopy()
}

// NodeConditions reports the node Ready: while B does not answer Ping the
// heartbeat stops and A's node lifecycle controller says otherwise.
func (p *Provider) NodeConditions(context.Context) []corev1.NodeCondition {
	return provider.HealthyConditions(p.startedAt, "the remote cluster")
}

// NodeLabels implements node.NodeDecorator: the config's node.labels.
func (p *Provider) NodeLabels() map[string]string { return p.cfg.Node.Labels }

// NodeTaints implements node.NodeDecorator: the config's node.taints.
func (p *Provider) NodeTaints() []corev1.Taint { return p.cfg.Node.Taints }
