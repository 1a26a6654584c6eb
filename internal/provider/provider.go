// Package provider is the daemon's view of a provider: the interface a
// provider implements to be run by virtual-kubelet, the optional
// capabilities behind the kubelet API, and the registry --provider picks from.
//
// The node library (package node) needs only PodLifecycleHandler; the rest
// here is what the command line needs to describe the Node and serve logs,
// exec, attach, port-forward and stats.
package provider

import (
	"context"
	"io"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/api"
)

// Provider is what virtual-kubelet runs: it manages the node's pods and
// describes the node.
type Provider interface {
	node.PodLifecycleHandler

	// Capacity, NodeConditions, NodeAddresses and NodeDaemonEndpoints are
	// read once, to build the Node the daemon registers. A provider whose
	// node changes later reports the whole node (node.NodeProvider's
	// NotifyNodeStatus): what it no longer reports is removed.

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

// The optional capabilities: a provider implements the ones it supports;
// the kubelet API answers 501 Not Implemented for the others.
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
	// StatsProvider serves /stats/summary and /metrics/resource (kubectl
	// top, through metrics-server). api.MetricsResourceFromSummary builds
	// the latter from the former.
	StatsProvider interface {
		GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error)
		GetMetricsResource(context.Context) ([]*dto.MetricFamily, error)
	}
	// NodeDecorator adds labels and taints of the provider's own (from its
	// config) to the Node the daemon registers.
	NodeDecorator interface {
		NodeLabels() map[string]string
		NodeTaints() []corev1.Taint
	}
	// EnvObjectCopier copies the ConfigMaps and Secrets a pod's env refers
	// to where it runs the pod: it gets pods with those references kept
	// (node.PodControllerConfig.KeepEnvObjectRefs) when it says so.
	EnvObjectCopier interface {
		CopiesEnvObjects() bool
	}
	// CapacityNotifier is a provider whose capacity changes while it runs
	// (see NodeProviderOf).
	CapacityNotifier interface {
		// NotifyCapacity calls f with the node's new capacity each time it
		// changes, until ctx ends. It does not block.
		NotifyCapacity(ctx context.Context, f func(corev1.ResourceList))
	}
)

// ResourceManager reads the objects pods refer to.
type ResourceManager struct {
	ConfigMaps corev1listers.ConfigMapLister
	Secrets    corev1listers.SecretLister
	Services   corev1listers.ServiceLister
}

// InitConfig is what a provider is built from.
type InitConfig struct {
	// ConfigPath is the --provider-config file; empty when none was given.
	ConfigPath string
	// NodeName is the name of the Node the provider backs.
	NodeName string
	// OperatingSystem is the --os flag.
	OperatingSystem string
	// InternalIP is the node's address, where the API server reaches the
	// kubelet API.
	InternalIP string
	// DaemonPort is the kubelet API port.
	DaemonPort int32
	// ClusterDomain is the cluster's DNS domain (--cluster-domain), for the
	// DNS search path of pods with the ClusterFirst policy.
	ClusterDomain string
	// ResourceManager reads ConfigMaps, Secrets and Services.
	ResourceManager *ResourceManager
	// KubeClient talks to the API server.
	KubeClient kubernetes.Interface
}

// InitFunc builds a provider. It returns a clear error, naming the file and
// field, for a bad configuration.
type InitFunc func(context.Context, InitConfig) (Provider, error)
