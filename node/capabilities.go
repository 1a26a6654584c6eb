package node

import (
	"context"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

// Capabilities is what a provider can do, found once by CapabilitiesOf and
// handed to every part that runs the provider: the pod controller
// (PodControllerConfig.Capabilities), the node controller
// (NodeProviderFor), the kubelet API routes (PodHandlerConfig) and whoever
// registers the Node (Decorator). A nil field is a capability the provider
// lacks, or did not declare (CapabilityDeclarer): nothing is spent on it.
// No part asks the provider again.
type Capabilities struct {
	// Pods is the pod lifecycle, every provider's.
	Pods PodLifecycleHandler
	// Notifier pushes pod status; without it pods are polled.
	Notifier PodNotifier
	// Node keeps the node; without it NaiveNodeProvider does.
	Node NodeProvider
	// Capacity reports capacity changes (see NodeProviderFor).
	Capacity CapacityNotifier
	// Decorator labels and taints the Node registered.
	Decorator NodeDecorator

	// The kubelet API (see PodHandlerConfig). MetricsResource is dropped
	// with Stats when stats are not declared.
	Logs            LogsProvider
	Exec            ExecProvider
	Attach          AttachProvider
	PortForward     PortForwardProvider
	Stats           StatsProvider
	MetricsResource MetricsResourceProvider

	// IPs chooses pods' IPs before they are created.
	IPs PodIPAssigner
	// Volumes gets the files of pods' volumes. Without it no volume is
	// resolved and no service-account token requested.
	Volumes PodVolumeHandler
	// TokensOnRead is Volumes' ReadsTokensOnRead (TokenOnReadHandler).
	TokensOnRead bool
	// CopiesEnvObjects is an EnvObjectCopier's CopiesEnvObjects: pods
	// reach the provider with their env references to ConfigMaps and
	// Secrets kept.
	CopiesEnvObjects bool
	// Probes has the controller run the pods' probes.
	Probes ProbeDelegator
	// Killer stops one container, for failed liveness and startup probes.
	Killer ContainerKiller
	// Resizer resizes pods in place; without it UpdatePod does.
	Resizer PodResizer
	// Devices publishes the node's devices as ResourceSlices and prepares
	// those allocated to pods (Dynamic Resource Allocation).
	Devices DeviceProvider
	// Runtime is a RuntimeFeaturesDeclarer's features, none without one.
	Runtime RuntimeFeatures
}

// CapabilitiesOf finds what p can do: the optional interfaces it
// implements, less those a CapabilityDeclarer does not declare. It is the
// one place a provider's capabilities are discovered.
func CapabilitiesOf(p PodLifecycleHandler) Capabilities {
	declarer, _ := p.(CapabilityDeclarer)
	declared := func(c Capability) bool { return declarer == nil || declarer.Declares(c) }
	c := Capabilities{Pods: p}
	c.Notifier, _ = p.(PodNotifier)
	c.Node, _ = p.(NodeProvider)
	c.Capacity, _ = p.(CapacityNotifier)
	c.Decorator, _ = p.(NodeDecorator)
	c.IPs, _ = p.(PodIPAssigner)
	if r, ok := p.(RuntimeFeaturesDeclarer); ok {
		c.Runtime = r.RuntimeFeatures()
	}
	if e, ok := p.(EnvObjectCopier); ok {
		c.CopiesEnvObjects = e.CopiesEnvObjects()
	}
	if declared(CapabilityLogs) {
		c.Logs, _ = p.(LogsProvider)
	}
	if declared(CapabilityExec) {
		c.Exec, _ = p.(ExecProvider)
	}
	if declared(CapabilityAttach) {
		c.Attach, _ = p.(AttachProvider)
	}
	if declared(CapabilityPortForward) {
		c.PortForward, _ = p.(PortForwardProvider)
	}
	if declared(CapabilityStats) {
		c.Stats, _ = p.(StatsProvider)
		c.MetricsResource, _ = p.(MetricsResourceProvider)
	}
	if declared(CapabilityVolumes) {
		c.Volumes, _ = p.(PodVolumeHandler)
		if r, ok := p.(TokenOnReadHandler); ok {
			c.TokensOnRead = r.ReadsTokensOnRead()
		}
	}
	if declared(CapabilityProbes) {
		c.Probes, _ = p.(ProbeDelegator)
	}
	if declared(CapabilityKillContainer) {
		c.Killer, _ = p.(ContainerKiller)
	}
	if declared(CapabilityResize) {
		c.Resizer, _ = p.(PodResizer)
	}
	if declared(CapabilityDevices) {
		c.Devices, _ = p.(DeviceProvider)
	}
	return c
}

// PodHandlerConfig routes the kubelet API to c: the pod list, and logs,
// exec, attach, port-forward and stats where c has them. The caller adds
// what is not the provider's (timeouts, the pods Kubernetes has bound to
// the node).
func (c Capabilities) PodHandlerConfig() api.PodHandlerConfig {
	cfg := api.PodHandlerConfig{GetPods: c.Pods.GetPods, GetPod: c.Pods.GetPod}
	if c.Logs != nil {
		cfg.GetContainerLogs = c.Logs.GetContainerLogs
	}
	if c.Exec != nil {
		cfg.RunInContainer = c.Exec.RunInContainer
	}
	if c.Attach != nil {
		cfg.AttachToContainer = c.Attach.AttachToContainer
	}
	if c.PortForward != nil {
		cfg.PortForward = c.PortForward.PortForward
	}
	if c.Stats != nil {
		cfg.GetStatsSummary = c.Stats.GetStatsSummary
		if c.MetricsResource != nil {
			cfg.GetMetricsResource = c.MetricsResource.GetMetricsResource
		}
	}
	return cfg
}

// NodeProviderFor is the NodeProvider that keeps the node registered as
// registered: c.Node, else NaiveNodeProvider. With a CapacityNotifier, the
// registered Node with each new capacity (allocatable the same) is what
// NotifyNodeStatus reports, in place of what c.Node's own would.
func (c Capabilities) NodeProviderFor(registered *corev1.Node) NodeProvider {
	np := c.Node
	if np == nil {
		np = NaiveNodeProvider{}
	}
	if sim, ok := np.(NodeStatusSimulator); ok {
		sim.SimulateFrom(registered.DeepCopy())
	}
	if c.Capacity != nil {
		return capacityUpdates{NodeProvider: np, registered: registered.DeepCopy(), notifier: c.Capacity}
	}
	return np
}

// capacityUpdates reports the registered Node with the provider's newest
// capacity.
type capacityUpdates struct {
	NodeProvider
	registered *corev1.Node
	notifier   CapacityNotifier
}

func (u capacityUpdates) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	u.notifier.NotifyCapacity(ctx, func(capacity corev1.ResourceList) {
		n := u.registered.DeepCopy()
		n.Status.Capacity, n.Status.Allocatable = capacity, capacity.DeepCopy()
		cb(n)
	})
}
