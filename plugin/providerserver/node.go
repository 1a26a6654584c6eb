package providerserver

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vkubelet/virtual-kubelet/node"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// Ping implements pb.NodeServer: the provider's Ping if it has one; a
// plugin that answers is otherwise healthy.
func (s *services) Ping(ctx context.Context, _ *pb.PingRequest) (*pb.PingResponse, error) {
	if np, ok := s.p.(node.NodeProvider); ok {
		return &pb.PingResponse{}, wire.ToStatus(np.Ping(ctx))
	}
	return &pb.PingResponse{}, nil
}

// GetNode implements pb.NodeServer: the node the provider describes, with
// the labels and taints of a node.NodeDecorator.
func (s *services) GetNode(ctx context.Context, _ *pb.GetNodeRequest) (*pb.GetNodeResponse, error) {
	n := &corev1.Node{}
	if d, ok := s.p.(node.NodeDecorator); ok {
		n.Labels = d.NodeLabels()
		n.Spec.Taints = d.NodeTaints()
	}
	n.Status.Capacity = s.p.Capacity(ctx)
	n.Status.Conditions = s.p.NodeConditions(ctx)
	n.Status.Addresses = s.p.NodeAddresses(ctx)
	n.Status.NodeInfo.OperatingSystem = s.p.OperatingSystem()
	data, err := wire.Encode(n)
	return &pb.GetNodeResponse{Node: data}, wire.ToStatus(err)
}

// WatchNode implements pb.NodeServer: the provider's NotifyNodeStatus for
// as long as the stream lasts.
func (s *services) WatchNode(_ *pb.WatchNodeRequest, stream pb.Node_WatchNodeServer) error {
	np, ok := s.p.(node.NodeProvider)
	if !ok {
		return status.Error(codes.Unimplemented, "this plugin does not report node status changes")
	}
	ctx := stream.Context()
	nodes := make(chan []byte, 16)
	np.NotifyNodeStatus(ctx, func(n *corev1.Node) {
		data, err := wire.Encode(n)
		if err != nil {
			return
		}
		select {
		case nodes <- data:
		case <-ctx.Done():
		}
	})
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.stopping:
			return status.Error(codes.Unavailable, "the plugin is stopping")
		case data := <-nodes:
			if err := stream.Send(&pb.NodeEvent{Node: data}); err != nil {
				return err
			}
		}
	}
}
