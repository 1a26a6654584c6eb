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
// and shape the node. They are found once, by CapabilitiesOf, into the
// Capabilities that every part running the provider receives (the pod and
// node controllers, the kubelet API routes, the Node registered). A
// provider without a capability gets 501 Not Implemented for its kubelet
// API routes, and costs nothing for it.
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
	// (see Capabilities.NodeProviderFor).
	CapacityNotifier interface {
		// NotifyCapacity calls f with the node's new capacity each time it
		// changes, until ctx ends. It does not block.
		NotifyCapacity(ctx context.Context, f func(corev1.ResourceList))
	}
	// NodeStatusSimulator is a NodeProvider that makes up the node's status
	// itself (the mock's node stages): NodeProviderFor hands it the Node
	// being registered, which the nodes it reports through
	// NotifyNodeStatus start from, so that they keep its labels,
	// annotations and spec.
	NodeStatusSimulator interface {
		SimulateFrom(registered *corev1.Node)
	}
	// CapabilityDeclarer is a provider that has the methods of optional
	// capabilities but serves only those it declares when it runs (a
	// plugin declares its own in its handshake). CapabilitiesOf leaves out
	// each Capability it does not declare: its kubelet API routes answer
	// 501 Not Implemented, and the pod controller neither resolves volumes
	// nor runs probes, kills containers or resizes pods through it.
	CapabilityDeclarer interface {
		Declares(Capability) bool
	}
)

// Capability names an optional capability a CapabilityDeclarer may leave
// out.
type Capability string

// The capabilities a CapabilityDeclarer declares; the kubelet API ones are
// named as the 501 answer names them.
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
	// CapabilityVolumes is PodVolumeHandler.
	CapabilityVolumes Capability = "volumes"
	// CapabilityDevices is DeviceProvider.
	CapabilityDevices Capability = "devices"
)
