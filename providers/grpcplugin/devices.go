package grpcplugin

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

var _ node.DeviceProvider = (*Provider)(nil)

// NotifyDevices implements node.DeviceProvider (used only when the plugin
// declared CAPABILITY_DEVICES): the plugin's WatchDevices stream,
// subscribed again whenever it ends, until ctx ends. Each event is all
// the node's devices; one that does not decode is skipped, so the slices
// published last stay.
func (p *Provider) NotifyDevices(ctx context.Context, f func([]node.DeviceDriver)) {
	go resubscribe(ctx, "WatchDevices", func(ctx context.Context) (bool, error) {
		stream, err := p.nodes.WatchDevices(ctx, &pb.WatchDevicesRequest{})
		if err != nil {
			return false, err
		}
		return receive(ctx, p, stream.Recv, func(ev *pb.DevicesEvent) error {
			drivers, err := wire.DevicesFromProto(ev)
			if err == nil {
				f(drivers)
			}
			return err
		})
	})
}

// PrepareDevices implements node.DeviceProvider with the plugin's
// PrepareDevices call.
func (p *Provider) PrepareDevices(ctx context.Context, pod *corev1.Pod, devices node.PodDevices) error {
	req, err := wire.PrepareDevicesToProto(pod, devices)
	if err != nil {
		return errdefs.AsInvalidInput(err)
	}
	ctx, cancel := p.call(ctx)
	defer cancel()
	_, err = p.lifecycle.PrepareDevices(ctx, req)
	return wire.FromStatus("PrepareDevices", err)
}
