package providerserver

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// Ping implements pb.NodeServer: the provider's Ping if it has one; a
// plugin that answers is otherwise healthy.
func (s *services) Ping(ctx context.Context, _ *pb.PingRequest) (*pb.PingResponse, error) {
	if np := s.c.Node; np != nil {
		return &pb.PingResponse{}, wire.ToStatus(np.Ping(ctx))
	}
	return &pb.PingResponse{}, nil
}

// GetNode implements pb.NodeServer: the node the provider describes, with
// the labels and taints of a node.NodeDecorator.
func (s *services) GetNode(ctx context.Context, _ *pb.GetNodeRequest) (*pb.GetNodeResponse, error) {
	n := &corev1.Node{}
	if d := s.c.Decorator; d != nil {
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
	np := s.c.Node
	if np == nil {
		return status.Error(codes.Unimplemented, "this plugin does not report node status changes")
	}
	return forward(stream.Context(), s, func(ctx context.Context, send func(*pb.NodeEvent)) {
		np.NotifyNodeStatus(ctx, func(n *corev1.Node) {
			if data, err := wire.Encode(n); err == nil {
				send(&pb.NodeEvent{Node: data})
			}
		})
	}, stream.Send)
}

// WatchCapacity implements pb.NodeServer: the provider's NotifyCapacity
// for as long as the stream lasts.
func (s *services) WatchCapacity(_ *pb.WatchCapacityRequest, stream pb.Node_WatchCapacityServer) error {
	cn := s.c.Capacity
	if cn == nil {
		return status.Error(codes.Unimplemented, "this plugin does not report capacity changes")
	}
	return forward(stream.Context(), s, func(ctx context.Context, send func(*pb.CapacityEvent)) {
		cn.NotifyCapacity(ctx, func(capacity corev1.ResourceList) {
			send(&pb.CapacityEvent{Capacity: wire.EncodeResources(capacity)})
		})
	}, stream.Send)
}

// forward sends what subscribe's callback gets on a server stream until
// the stream ends or the plugin stops. The callback never blocks past the
// stream's end.
func forward[E any](ctx context.Context, s *services, subscribe func(context.Context, func(E)), send func(E) error) error {
	events := make(chan E, 16)
	subscribe(ctx, func(e E) {
		select {
		case events <- e:
		case <-ctx.Done():
		}
	})
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-s.stopping:
			return status.Error(codes.Unavailable, "the plugin is stopping")
		case e := <-events:
			if err := send(e); err != nil {
				return err
			}
		}
	}
}
