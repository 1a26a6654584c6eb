package kubernetes

import (
	"context"

	"github.com/vkubelet/virtual-kubelet/node"
)

var _ node.PodResizer = (*Provider)(nil)

// ResizePod implements node.PodResizer by refusing: the provider does not
// resize pods in B yet (through B's resize subresource), and UpdatePod
// leaves B's resources as they are, so a resize it took would never be
// applied. The pod shows PodResizePending/Infeasible saying so.
func (*Provider) ResizePod(context.Context, node.ResizeRequest) (node.ResizeResult, error) {
	return node.ResizeResult{Outcome: node.ResizeInfeasible, Message: "the kubernetes provider does not resize pods in the remote cluster in place"}, nil
}
