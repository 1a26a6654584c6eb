// Package provider is the registry --provider picks from: a provider
// registers the InitFunc that builds it (a node.Provider, the one contract
// of the node library) from what the daemon gives it, InitConfig.
//
// It is public so that a provider in another module can be built into the
// daemon: its package calls Register in an init function, and a main of
// its author's own imports it and runs package daemon's Execute. The
// providers of this repository (providers/...) register the same way from
// cmd/virtual-kubelet, and a binary of your own may register them too.
package provider

import (
	"context"
	"fmt"
	"os"

	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"sigs.k8s.io/yaml"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/intern"
)

// ResourceManager reads the node's pods and the objects they refer to.
type ResourceManager struct {
	// Pods lists the node's pods, from the informer the pod controller
	// works from: the pods it hands to the provider.
	Pods corev1listers.PodLister
	// PodsSynced reports whether Pods has listed them all once; until
	// then a pod missing from Pods may exist.
	PodsSynced cache.InformerSynced
	ConfigMaps corev1listers.ConfigMapLister
	Secrets    corev1listers.SecretLister
	Services   corev1listers.ServiceLister
}

// InitConfig is what a provider is built from.
type InitConfig struct {
	// ConfigPath is the --provider-config file; empty when none was given.
	ConfigPath string
	// StageConfigs are the --stage-config files: kwok's Stages, which the
	// mock provider runs its pods and node by.
	StageConfigs []string
	// WatchStages is --watch-stages: the mock provider also runs by the
	// kwok Stages (and usage objects) in the cluster, through
	// DynamicInformers, as they change.
	WatchStages bool
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
	// ResourceManager reads the node's pods, ConfigMaps, Secrets and
	// Services.
	ResourceManager *ResourceManager
	// KubeClient talks to the API server.
	KubeClient kubernetes.Interface
	// DynamicInformers gives informers of any resource, shared by the
	// providers of all the process's nodes: one watch of a kind however
	// many nodes read it. Its Start starts the informers asked for so far,
	// for the life of the process, not of the provider. Nil in a plugin
	// process.
	DynamicInformers dynamicinformer.DynamicSharedInformerFactory
	// NodeWatch, when the process runs several nodes, is the one watch of
	// their Nodes they share, and NodeLister its cache: a provider that
	// follows its own Node subscribes to it rather than watching the Node
	// itself, which would be a thousand watches for a thousand nodes. Both
	// nil with one node, or in a plugin process.
	NodeWatch  node.NodeWatch
	NodeLister corev1listers.NodeLister
	// EventRecorder records Events on the node's pods, as the pod
	// controller does, for what a provider refuses outside a provider call
	// (a copy into a container, say); nil in a plugin process.
	EventRecorder record.EventRecorder
	// PodSyncWorkers is how many workers each of the node's pod controller
	// queues has: a provider that makes calls wait (the mock's hang-calls)
	// keeps most of them free. 0 when unknown (a plugin process).
	PodSyncWorkers int
	// Interner shares the values pods repeat (labels, resource lists,
	// environment lists) between the pod informers' caches and the
	// providers of the process: a provider keeping such values from the
	// pods it is given keeps them through it, so that its copies are the
	// cache's instances. Nil when the daemon does not intern; a provider
	// then makes its own or keeps its copies.
	Interner *intern.Interner
}

// InitFunc builds a provider. It returns a clear error, naming the file and
// field, for a bad configuration. Its context is the provider's life: the
// daemon ends it when it stops serving the node (at exit, or when another
// replica takes the node over with --leader-elect), and the provider must
// then let go of what it holds (goroutines, connections, watches).
type InitFunc func(context.Context, InitConfig) (node.Provider, error)

// LoadConfig reads the --provider-config file at path into cfg, refusing
// unknown fields, then checks it with validate. An empty path is an error
// saying what the file must name (need); every error names the file.
func LoadConfig(path, need string, cfg any, validate func() error) error {
	if path == "" {
		return fmt.Errorf("--provider-config is required: it names %s", need)
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("provider config: %w", err)
	}
	if err := yaml.UnmarshalStrict(data, cfg); err != nil {
		return fmt.Errorf("provider config %s: %v", path, err)
	}
	if err := validate(); err != nil {
		return fmt.Errorf("provider config %s: %w", path, err)
	}
	return nil
}
