package slurm

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node"
)

var _ node.PodIPAssigner = (*Provider)(nil)

// AssignPodIPs implements node.PodIPAssigner: a job's containers share the
// node's network, so a pod's IP is the node's whatever the node's pod CIDRs
// offer, and status.podIP in its environment says so.
func (p *Provider) AssignPodIPs(context.Context, *corev1.Pod) ([]string, error) {
	if p.InternalIP == "" {
		return nil, nil
	}
	return []string{p.InternalIP}, nil
}
