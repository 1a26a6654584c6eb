package providerserver

import (
	"context"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/vkubelet/virtual-kubelet/node"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// WatchDevices implements pb.NodeServer: the provider's NotifyDevices for
// as long as the stream lasts.
func (s *services) WatchDevices(_ *pb.WatchDevicesRequest, stream pb.Node_WatchDevicesServer) error {
	dp := s.c.Devices
	if dp == nil {
		return status.Error(codes.Unimplemented, "this plugin has no devices")
	}
	return forward(stream.Context(), s, func(ctx context.Context, send func(*pb.DevicesEvent)) {
		dp.NotifyDevices(ctx, func(drivers []node.DeviceDriver) {
			if ev, err := wire.DevicesToProto(drivers); err == nil {
				send(ev)
			}
		})
	}, stream.Send)
}

// PrepareDevices implements pb.LifecycleServer: the provider's
// PrepareDevices.
func (s *services) PrepareDevices(ctx context.Context, req *pb.PrepareDevicesRequest) (*pb.PrepareDevicesResponse, error) {
	dp := s.c.Devices
	if dp == nil {
		return nil, status.Error(codes.Unimplemented, "this plugin has no devices")
	}
	pod, devices, err := wire.PrepareDevicesFromProto(req)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return &pb.PrepareDevicesResponse{}, wire.ToStatus(dp.PrepareDevices(ctx, pod, devices))
}
