// Package grpcplugin is --provider grpc: a node.Provider whose pods run in
// a provider plugin, another process answering the contract of
// plugin/providerv1alpha1 (see package plugin/providerserver for the Go side
// of a plugin).
//
// The plugin being down is a provider outage: Ping fails, so the node goes
// NotReady; calls fail fast with an error the pod controller retries; gRPC
// reconnects by itself and the pod status stream is subscribed again, the
// plugin resending every pod first, so no status change is lost.
package grpcplugin

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"google.golang.org/grpc"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// maxMessage is the largest message the daemon takes from a plugin: a pod
// list of thousands of pods.
const maxMessage = 256 << 20

// Provider is a plugin seen as a node.Provider. Create it with New.
type Provider struct {
	// NodeBasics answers NodeAddresses, NodeDaemonEndpoints and
	// OperatingSystem: the daemon, not the plugin, serves the kubelet API.
	provider.NodeBasics
	endpoint string
	name     string
	timeout  time.Duration

	conn      *grpc.ClientConn
	lifecycle pb.LifecycleClient
	nodes     pb.NodeClient
	kubelet   pb.KubeletClient

	caps map[pb.Capability]bool
	// podNetwork: the plugin said this process reaches its pods' IPs.
	podNetwork bool
	// runtime is what the plugin said its containers can be given.
	runtime node.RuntimeFeatures
	// node is the node the plugin described at the start.
	node *corev1.Node
}

var (
	_ node.Provider                = (*Provider)(nil)
	_ node.PodNotifier             = (*Provider)(nil)
	_ node.NodeProvider            = (*Provider)(nil)
	_ node.NodeDecorator           = (*Provider)(nil)
	_ node.EnvObjectCopier         = (*Provider)(nil)
	_ node.PodVolumeHandler        = (*Provider)(nil)
	_ node.LogsProvider            = (*Provider)(nil)
	_ node.ExecProvider            = (*Provider)(nil)
	_ node.AttachProvider          = (*Provider)(nil)
	_ node.PortForwardProvider     = (*Provider)(nil)
	_ node.StatsProvider           = (*Provider)(nil)
	_ node.CapabilityDeclarer      = (*Provider)(nil)
	_ node.ProbeDelegator          = (*Provider)(nil)
	_ node.ContainerKiller         = (*Provider)(nil)
	_ node.PodResizer              = (*Provider)(nil)
	_ node.RuntimeFeaturesDeclarer = (*Provider)(nil)
)

// New connects to the plugin the config file names, waiting up to its
// connectTimeout for the handshake, and reads the node it describes. The
// connection is closed when ctx ends.
func New(ctx context.Context, ic provider.InitConfig) (node.Provider, error) {
	var cfg Config
	if err := provider.LoadConfig(ic.ConfigPath, "the plugin's endpoint", &cfg, cfg.validate); err != nil {
		return nil, err
	}
	creds, err := cfg.credentials()
	if err != nil {
		return nil, fmt.Errorf("provider config %s: %w", ic.ConfigPath, err)
	}
	conn, err := grpc.NewClient(cfg.Endpoint, creds, grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(maxMessage)))
	if err != nil {
		return nil, fmt.Errorf("provider config %s: endpoint %q: %w", ic.ConfigPath, cfg.Endpoint, err)
	}
	p := newProvider(conn, cfg.Endpoint, cfg.CallTimeout.Duration, provider.NodeBasicsFrom(ic))
	if err := p.connect(ctx, cfg.ConnectTimeout.Duration); err != nil {
		conn.Close()
		return nil, err
	}
	// ctx is the provider's life: the connection goes with it.
	context.AfterFunc(ctx, func() { conn.Close() })
	return p, nil
}

func newProvider(conn *grpc.ClientConn, endpoint string, timeout time.Duration, basics provider.NodeBasics) *Provider {
	return &Provider{
		NodeBasics: basics, endpoint: endpoint, timeout: timeout, conn: conn,
		lifecycle: pb.NewLifecycleClient(conn), nodes: pb.NewNodeClient(conn), kubelet: pb.NewKubeletClient(conn),
	}
}

// connect makes the handshake, waiting for the plugin to listen, and reads
// its node.
func (p *Provider) connect(ctx context.Context, wait time.Duration) error {
	hctx, cancel := context.WithTimeout(ctx, wait)
	defer cancel()
	hs, err := pb.NewPluginClient(p.conn).Handshake(hctx, &pb.HandshakeRequest{ProtocolVersion: wire.ProtocolVersion}, grpc.WaitForReady(true))
	if err != nil {
		return fmt.Errorf("plugin at %s: handshake: %w", p.endpoint, err)
	}
	if v := hs.GetProtocolVersion(); v != wire.ProtocolVersion {
		return fmt.Errorf("plugin at %s speaks protocol version %d; this daemon speaks %d", p.endpoint, v, wire.ProtocolVersion)
	}
	p.name, p.podNetwork = hs.GetName(), hs.GetPodNetworkReachable()
	p.runtime = node.RuntimeFeatures{
		UserNamespaces:          hs.GetRuntimeFeatures().GetUserNamespaces(),
		RecursiveReadOnlyMounts: hs.GetRuntimeFeatures().GetRecursiveReadOnlyMounts(),
	}
	p.caps = map[pb.Capability]bool{}
	for _, c := range hs.GetCapabilities() {
		p.caps[c] = true // values this daemon does not know are never looked up
	}
	nctx, cancel := p.call(ctx)
	defer cancel()
	resp, err := p.nodes.GetNode(nctx, &pb.GetNodeRequest{})
	if err != nil {
		return fmt.Errorf("plugin at %s: %w", p.endpoint, wire.FromStatus("GetNode", err))
	}
	if p.node, err = wire.Decode[corev1.Node]("GetNode answer", resp.GetNode()); err != nil {
		return fmt.Errorf("plugin at %s: %w", p.endpoint, err)
	}
	return nil
}

// call bounds a unary call by the call timeout.
func (p *Provider) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, p.timeout)
}

// String names the plugin in the daemon's logs.
func (p *Provider) String() string { return fmt.Sprintf("plugin %q at %s", p.name, p.endpoint) }

// errNotServed is the error of a capability the plugin did not declare.
func (p *Provider) errNotServed(what string) error {
	return errdefs.NotImplementedf("%s does not serve %s (its handshake did not declare it)", p, what)
}

// pluginCapability is the contract's capability for each kubelet API one.
var pluginCapability = map[node.Capability]pb.Capability{
	node.CapabilityLogs:          pb.Capability_CAPABILITY_LOGS,
	node.CapabilityExec:          pb.Capability_CAPABILITY_EXEC,
	node.CapabilityAttach:        pb.Capability_CAPABILITY_ATTACH,
	node.CapabilityPortForward:   pb.Capability_CAPABILITY_PORT_FORWARD,
	node.CapabilityStats:         pb.Capability_CAPABILITY_STATS,
	node.CapabilityProbes:        pb.Capability_CAPABILITY_PROBES,
	node.CapabilityKillContainer: pb.Capability_CAPABILITY_KILL_CONTAINER,
	node.CapabilityResize:        pb.Capability_CAPABILITY_RESIZE,
	node.CapabilityVolumes:       pb.Capability_CAPABILITY_VOLUMES,
	node.CapabilityDevices:       pb.Capability_CAPABILITY_DEVICES,
}

// Declares implements node.CapabilityDeclarer: what the plugin's handshake
// declared, so the kubelet API answers 501 for the rest, and the pod
// controller runs the probes of a plugin that asks it to, resizes through
// ResizePod only a plugin that serves it, resolves volumes (service
// account tokens included) only for a plugin that takes them, and
// publishes devices only for a plugin that has them.
func (p *Provider) Declares(c node.Capability) bool {
	pc, ok := pluginCapability[c]
	return ok && p.caps[pc]
}

// PodNetworkReachable implements node.ProbeDelegator (used only when the
// plugin declared CAPABILITY_PROBES): what its handshake said.
func (p *Provider) PodNetworkReachable() bool { return p.podNetwork }

// RuntimeFeatures implements node.RuntimeFeaturesDeclarer: what the
// plugin's handshake said its containers can be given.
func (p *Provider) RuntimeFeatures() node.RuntimeFeatures { return p.runtime }

// Capacity is the capacity the plugin declared at the start.
func (p *Provider) Capacity(context.Context) corev1.ResourceList {
	return p.node.Status.Capacity.DeepCopy()
}

// NodeConditions are the conditions the plugin declared at the start.
func (p *Provider) NodeConditions(context.Context) []corev1.NodeCondition {
	return append([]corev1.NodeCondition(nil), p.node.Status.Conditions...)
}

// NodeLabels are the plugin's labels for the node.
func (p *Provider) NodeLabels() map[string]string { return p.node.Labels }

// NodeTaints are the plugin's taints for the node.
func (p *Provider) NodeTaints() []corev1.Taint { return p.node.Spec.Taints }

// CopiesEnvObjects reports whether the plugin declared it copies the
// objects pods' env refers to.
func (p *Provider) CopiesEnvObjects() bool { return p.caps[pb.Capability_CAPABILITY_ENV_OBJECTS] }
