// Package providerserver exposes a node.Provider as a provider plugin: the
// gRPC services of plugin/providerv1alpha1, which a daemon started with
// --provider grpc calls. The provider's optional capabilities (PodNotifier,
// NodeProvider, CapacityNotifier, LogsProvider, ExecProvider,
// ProbeDelegator, ContainerKiller, PodResizer, DeviceProvider, ...) are found by type assertion
// and declared in the handshake; the others answer UNIMPLEMENTED.
package providerserver

import (
	"context"
	"net"
	"time"

	"google.golang.org/grpc"

	"github.com/vkubelet/virtual-kubelet/node"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
)

// stopGrace is how long Serve lets calls in flight finish once ctx ends;
// the streams (logs -f, exec) are cut after it.
const stopGrace = 5 * time.Second

// Serve answers the plugin contract for p on lis until ctx ends or lis
// fails; it returns nil after ctx ended. opts are passed to grpc.NewServer
// (TLS credentials, for example).
func Serve(ctx context.Context, lis net.Listener, p node.Provider, opts ...grpc.ServerOption) error {
	srv := grpc.NewServer(opts...)
	s := newServices(ctx, p)
	pb.RegisterPluginServer(srv, s)
	pb.RegisterLifecycleServer(srv, s)
	pb.RegisterNodeServer(srv, s)
	pb.RegisterKubeletServer(srv, s)

	done := make(chan struct{})
	defer close(done)
	go func() {
		select {
		case <-done:
			return
		case <-ctx.Done():
		}
		t := time.AfterFunc(stopGrace, srv.Stop)
		defer t.Stop()
		srv.GracefulStop()
	}()
	if err := srv.Serve(lis); err != nil && ctx.Err() == nil {
		return err
	}
	return nil
}

// services implements the four services of the contract for one provider.
type services struct {
	pb.UnimplementedPluginServer
	pb.UnimplementedLifecycleServer
	pb.UnimplementedNodeServer
	pb.UnimplementedKubeletServer

	p node.Provider
	// c is what p can do, found once.
	c    node.Capabilities
	feed *podFeed // nil unless p is a node.PodNotifier
	// stopping ends the watch streams when Serve stops: a graceful stop
	// waits for the streams, which would otherwise last.
	stopping <-chan struct{}
	caps     []pb.Capability
}

func newServices(ctx context.Context, p node.Provider) *services {
	c := node.CapabilitiesOf(p)
	s := &services{p: p, c: c, caps: contractCapabilities(c), stopping: ctx.Done()}
	if n := c.Notifier; n != nil {
		s.feed = newPodFeed()
		n.NotifyPods(ctx, s.feed.publish)
	}
	return s
}

// contractCapabilities lists the optional parts of the contract a
// provider with capabilities c serves.
func contractCapabilities(c node.Capabilities) []pb.Capability {
	var caps []pb.Capability
	add := func(has bool, c pb.Capability) {
		if has {
			caps = append(caps, c)
		}
	}
	add(c.Notifier != nil, pb.Capability_CAPABILITY_POD_NOTIFIER)
	add(c.Node != nil, pb.Capability_CAPABILITY_NODE_STATUS)
	add(c.Logs != nil, pb.Capability_CAPABILITY_LOGS)
	add(c.Exec != nil, pb.Capability_CAPABILITY_EXEC)
	add(c.Attach != nil, pb.Capability_CAPABILITY_ATTACH)
	add(c.PortForward != nil, pb.Capability_CAPABILITY_PORT_FORWARD)
	add(c.Stats != nil, pb.Capability_CAPABILITY_STATS)
	add(c.Volumes != nil, pb.Capability_CAPABILITY_VOLUMES)
	add(c.CopiesEnvObjects, pb.Capability_CAPABILITY_ENV_OBJECTS)
	add(c.Capacity != nil, pb.Capability_CAPABILITY_CAPACITY)
	add(c.Probes != nil, pb.Capability_CAPABILITY_PROBES)
	add(c.Killer != nil, pb.Capability_CAPABILITY_KILL_CONTAINER)
	add(c.Resizer != nil, pb.Capability_CAPABILITY_RESIZE)
	add(c.Devices != nil, pb.Capability_CAPABILITY_DEVICES)
	return caps
}
