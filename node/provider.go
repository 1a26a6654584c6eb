package node

import (
	"context"
	"io"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

// Provider is the contract a provider implements to back a virtual node:
// the pod lifecycle, and the node it runs pods on, which is read once to
// register the Node.
//
// Everything else is optional, and a provider says what it can do by
// implementing the interfaces below: PodNotifier pushes pod status instead
// of being polled, NodeProvider reports the node's health and changes, and
// the capabilities (logs, exec, attach, port-forward, stats, env-object
// copying, changing capacity, node labels and taints) serve the kubelet API
// and shape the node. Whatever runs a provider (the daemon, package
// nodeutil, the kubelet API routes) discovers them through PodHandlerConfigOf,
// NodeProviderOf and KeepsEnvObjectRefs, one way. A provider without a
// capability gets 501 Not Implemented for its kubelet API routes.
type Provider interface {
	PodLifecycleHandler

	// Capacity is the node's capacity; allocatable is the same.
	Capacity(context.Context) corev1.ResourceList
	// NodeConditions are the node's conditions (Ready and the pressure
	// conditions).
	NodeConditions(context.Context) []corev1.NodeCondition
	// NodeAddresses are the node's addresses; the InternalIP is where the
	// API server reaches the kubelet API.
	NodeAddresses(context.Context) []corev1.NodeAddress
	// NodeDaemonEndpoints says on which port the kubelet API listens.
	NodeDaemonEndpoints(context.Context) *corev1.NodeDaemonEndpoints
	// OperatingSystem is the operating system the node runs pods for.
	OperatingSystem() string
}

// The optional capabilities of a provider.
type (
	// LogsProvider serves `kubectl logs`.
	LogsProvider interface {
		GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error)
	}
	// ExecProvider serves `kubectl exec`.
	ExecProvider interface {
		RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error
	}
	// AttachProvider serves `kubectl attach`.
	AttachProvider interface {
		AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error
	}
	// PortForwardProvider serves `kubectl port-forward`.
	PortForwardProvider interface {
		PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error
	}
	// StatsProvider serves /stats/summary, and from it /metrics/resource
	// (kubectl top, through metrics-server) in the kubelet's format.
	StatsProvider interface {
		GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error)
	}
	// MetricsResourceProvider serves /metrics/resource from metric families
	// of its own, in place of those written from its stats summary.
	MetricsResourceProvider interface {
		GetMetricsResource(context.Context) ([]*dto.MetricFamily, error)
	}
	// NodeDecorator adds labels and taints of the provider's own (from its
	// config) to the Node that is registered.
	NodeDecorator interface {
		NodeLabels() map[string]string
		NodeTaints() []corev1.Taint
	}
	// EnvObjectCopier copies the ConfigMaps and Secrets a pod's env refers
	// to where it runs the pod: when it says so, it gets pods with those
	// references kept (PodControllerConfig.KeepEnvObjectRefs).
	EnvObjectCopier interface {
		CopiesEnvObjects() bool
	}
	// PodIPAssigner chooses the IPs of a pod before it is created, so that
	// its environment (status.podIP, status.podIPs, and $(VAR) uses of
	// them) resolves to the addresses the pod will have, as on a kubelet.
	// AssignPodIPs is called once per pod, before its first CreatePod,
	// with status.podIPs holding what the node's allocator offers from
	// spec.podCIDRs (nothing when the node has none); it returns the pod's
	// IPs, one per IP family, primary first: the offered ones, its own, or
	// none to leave them unknown until the provider reports them. A
	// provider without it gets the offered IPs. Either way CreatePod gets
	// the pod with status.podIP(s) set to the decided IPs, which the
	// provider should report as its status. A pod that already has IPs
	// (one created again after the provider lost it) keeps them.
	PodIPAssigner interface {
		AssignPodIPs(ctx context.Context, pod *corev1.Pod) ([]string, error)
	}
	// PodResizer resizes a running pod in place (`kubectl patch
	// --subresource resize`). ResizePod is called when a pod's container
	// resources differ from those the provider runs it with, before
	// UpdatePod; it says whether the resize is done, in progress (the
	// provider then reports containerStatuses[].resources as applied),
	// deferred (proposed again later) or infeasible, and restarts the
	// containers the request marks Restart. CreatePod and UpdatePod get
	// the pod with the resources the provider accepted, so a deferred or
	// infeasible resize never reaches them. A provider without it is
	// resized by UpdatePod, which gets the new resources and is expected
	// to apply them (restarting containers whose resizePolicy says
	// RestartContainer): the resize is done when UpdatePod succeeds.
	PodResizer interface {
		ResizePod(ctx context.Context, req ResizeRequest) (ResizeResult, error)
	}
	// ProbeDelegator is a provider that does not evaluate its pods'
	// readiness, liveness and startup probes, and has the pod controller
	// evaluate them as a kubelet does (package node/internal/prober): exec
	// probes through its ExecProvider, HTTP, TCP and gRPC probes against the
	// pod's IP when PodNetworkReachable says this process reaches it. The
	// results set the containers' ready and started in the status the
	// provider reports; a failed liveness or startup probe stops the
	// container through its ContainerKiller. A probe it cannot run (no exec,
	// no pod network, no ContainerKiller for liveness and startup) is
	// ignored, with one Warning Event (ProbeUnsupported) per pod naming it.
	// A provider without it is trusted to report ready and started itself,
	// probes included (the kubernetes provider's cluster runs them), as
	// before.
	ProbeDelegator interface {
		PodNetworkReachable() bool
	}
	// ContainerKiller stops one container of a running pod, as the kubelet
	// stops one whose liveness or startup probe failed: with grace for it
	// to exit, then killed. The pod's restart policy then decides, as for
	// any container exit, whether it runs again (restartCount+1, the ended
	// run in lastState.terminated).
	ContainerKiller interface {
		KillContainer(ctx context.Context, namespace, podName, containerName string, grace time.Duration) error
	}
	// CapacityNotifier is a provider whose capacity changes while it runs
	// (see NodeProviderOf).
	CapacityNotifier interface {
		// NotifyCapacity calls f with the node's new capacity each time it
		// changes, until ctx ends. It does not block.
		NotifyCapacity(ctx context.Context, f func(corev1.ResourceList))
	}
	// CapabilityDeclarer is a provider that has the methods of optional
	// capabilities but serves only those it declares when it runs (a
	// plugin declares its own in its handshake). PodHandlerConfigOf routes
	// only the declared kubelet API ones, the others answer 501 Not
	// Implemented; the pod controller uses ProbeDelegator, ContainerKiller
	// and PodResizer only when declared.
	CapabilityDeclarer interface {
		Declares(Capability) bool
	}
)

// Capability names a kubelet API capability (see CapabilityDeclarer).
type Capability string

// The kubelet API capabilities, named as the 501 answer names them.
const (
	CapabilityLogs        Capability = "logs"
	CapabilityExec        Capability = "exec"
	CapabilityAttach      Capability = "attach"
	CapabilityPortForward Capability = "port-forward"
	CapabilityStats       Capability = "stats"
	// CapabilityProbes is ProbeDelegator.
	CapabilityProbes Capability = "probes"
	// CapabilityKillContainer is ContainerKiller.
	CapabilityKillContainer Capability = "kill-container"
	// CapabilityResize is PodResizer.
	CapabilityResize Capability = "resize"
)

// declares reports whether p serves capability c: always, unless it is a
// CapabilityDeclarer that does not declare it.
func declares(p any, c Capability) bool {
	d, ok := p.(CapabilityDeclarer)
	return !ok || d.Declares(c)
}

// PodHandlerConfigOf routes the kubelet API to p's capabilities: the pod
// list, and logs, exec, attach, port-forward and stats where p has them
// (and, for a CapabilityDeclarer, declares them).
// The caller adds what is not the provider's (timeouts, the pods Kubernetes
// has bound to the node).
func PodHandlerConfigOf(p PodLifecycleHandler) api.PodHandlerConfig {
	cfg := api.PodHandlerConfig{GetPods: p.GetPods, GetPod: p.GetPod}
	if lp, ok := p.(LogsProvider); ok && declares(p, CapabilityLogs) {
		cfg.GetContainerLogs = lp.GetContainerLogs
	}
	if ep, ok := p.(ExecProvider); ok && declares(p, CapabilityExec) {
		cfg.RunInContainer = ep.RunInContainer
	}
	if ap, ok := p.(AttachProvider); ok && declares(p, CapabilityAttach) {
		cfg.AttachToContainer = ap.AttachToContainer
	}
	if pp, ok := p.(PortForwardProvider); ok && declares(p, CapabilityPortForward) {
		cfg.PortForward = pp.PortForward
	}
	if sp, ok := p.(StatsProvider); ok && declares(p, CapabilityStats) {
		cfg.GetStatsSummary = sp.GetStatsSummary
	}
	if mp, ok := p.(MetricsResourceProvider); ok && declares(p, CapabilityStats) {
		cfg.GetMetricsResource = mp.GetMetricsResource
	}
	return cfg
}

// KeepsEnvObjectRefs reports whether p wants pods with their env references
// to ConfigMaps and Secrets kept (an EnvObjectCopier that copies them).
func KeepsEnvObjectRefs(p PodLifecycleHandler) bool {
	c, ok := p.(EnvObjectCopier)
	return ok && c.CopiesEnvObjects()
}

// NodeProviderOf is the NodeProvider that keeps p's node: p itself when it
// is one, else NaiveNodeProvider. For a CapacityNotifier, the registered
// Node with each new capacity (allocatable the same) is what
// NotifyNodeStatus reports, in place of what p's own would.
func NodeProviderOf(p PodLifecycleHandler, registered *corev1.Node) NodeProvider {
	np, ok := p.(NodeProvider)
	if !ok {
		np = NaiveNodeProvider{}
	}
	if c, ok := p.(CapacityNotifier); ok {
		return capacityUpdates{NodeProvider: np, registered: registered.DeepCopy(), notifier: c}
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
