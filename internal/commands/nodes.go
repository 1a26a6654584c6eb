package commands

import (
	"context"
	"fmt"
	"maps"
	"runtime"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/informers"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/internal/ha"
	"github.com/vkubelet/virtual-kubelet/internal/metrics"
	"github.com/vkubelet/virtual-kubelet/internal/version"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/intern"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// shared is what the nodes of one process have in common.
type shared struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory // ConfigMaps, Secrets, Services
	// interner shares the values pods repeat between every pod informer's
	// cache and every provider of the process.
	interner *intern.Interner
	// With one node, nil: it watches its own pods and Node.
	pods      *nodeutil.PodsByNode
	nodeWatch *nodeutil.NodeWatch
	// nodes is the cache of the process's Nodes that nodeWatch watches,
	// from nodeInformer: those it registers or, with --manage-*, those it
	// manages.
	nodes        corev1listers.NodeLister
	nodeInformer cache.SharedIndexInformer
	objects      *nodeutil.ObjectInformers
	events       record.EventBroadcaster
	// done ends the process's informers; those a node asks for after
	// they started (ResourceClaims, for a provider with devices) start
	// with it.
	done <-chan struct{}
	// stops undo what startShared started, in reverse order.
	stops []func()

	// dynamic gives the informers of other kinds the providers ask for
	// (the mock's kwok objects), started for the process's life.
	dynamic processDynamicInformers

	// boundPods is the cache of the bound pods that pods dispatches,
	// where the shared listener finds a pod's node.
	boundPods corev1listers.PodLister
}

// startShared starts what the nodes share: the ConfigMap, Secret and
// Service informers, one event broadcaster, and with many nodes (or
// replicas, whose nodes come and go, or --shared-pod-watch) one watch of
// their pods, dispatched by node name, and one of their Nodes. Otherwise
// the informers' factory starts with the node.
// dyn serves the informers of other kinds that providers ask for.
func startShared(ctx context.Context, o *Options, client kubernetes.Interface, dyn dynamic.Interface) (*shared, error) {
	// One event broadcaster for all nodes: each has its own watchers and
	// a thousand-event queue, 70 MB and 2,000 goroutines at 1,000 nodes.
	events := record.NewBroadcaster()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	dynamicFactory := dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0)
	sh := &shared{
		client: client, factory: nodeutil.NewInformerFactory(client, o.Client.FullResyncPeriod), interner: intern.New(), events: events,
		dynamic: processDynamicInformers{dynamicFactory, ctx.Done()},
		stops:   []func(){events.Shutdown, dynamicFactory.Shutdown},
	}
	if o.Node.NodeCount <= 1 && !o.LeaderElect.LeaderElect && !o.Node.SharedPodWatch && !o.Node.Managed.Enabled() {
		return sh, nil
	}
	podFactory := informers.NewSharedInformerFactoryWithOptions(client, o.Client.FullResyncPeriod,
		informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.FieldSelector = "spec.nodeName!=" }),
		informers.WithTransform(nodeutil.TrimPodsWith(sh.interner)))
	nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(nodeListOptions(&o.Node)),
		informers.WithTransform(nodeutil.TrimNodesWith(sh.interner)))
	var err error
	if sh.pods, err = nodeutil.NewPodsByNode(podFactory.Core().V1().Pods()); err != nil {
		sh.stop()
		return nil, err
	}
	sh.boundPods = podFactory.Core().V1().Pods().Lister()
	metrics.RegisterPodPhases(sh.boundPods)
	sh.nodes = nodeFactory.Core().V1().Nodes().Lister()
	sh.nodeInformer = nodeFactory.Core().V1().Nodes().Informer()
	if sh.nodeWatch, err = nodeutil.NewNodeWatch(nodeFactory.Core().V1().Nodes()); err != nil {
		sh.stop()
		return nil, err
	}
	if sh.objects, err = nodeutil.NewObjectInformers(sh.factory); err != nil {
		sh.stop()
		return nil, err
	}
	// Every informer the nodes use exists before the factory starts: the
	// nodes' own Start is a no-op (processInformers).
	sh.factory.Core().V1().Services().Informer()
	sh.factory.Start(ctx.Done())
	sh.done = ctx.Done()
	podFactory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	sh.stops = append(sh.stops, sh.factory.Shutdown, podFactory.Shutdown, nodeFactory.Shutdown)
	return sh, nil
}

// nodeInformers is the informer factory a node gets: the process's own
// with many nodes.
func (sh *shared) nodeInformers() informers.SharedInformerFactory {
	if sh.pods == nil {
		return sh.factory
	}
	return processInformers{sh.factory, sh.done}
}

// stop stops what startShared started.
func (sh *shared) stop() {
	for i := len(sh.stops) - 1; i >= 0; i-- {
		sh.stops[i]()
	}
}

// buildNode makes one virtual node: its provider (whose kubelet API will
// listen on port), its Node controller and pod controller. What the
// provider can do is found once, here, and returned for its kubelet API.
//
// With from, a Node someone else created (managed nodes), the node is
// that one: its spec is managedSpec's, and the controller writes only its
// status (node.WithExistingNode).
func buildNode(ctx context.Context, o *Options, name string, port int32, nodeIP string, sh *shared, from *corev1.Node) (*nodeutil.Node, node.Capabilities, error) {
	client := sh.client
	core := sh.factory.Core().V1()
	// The node's pods: the provider reads the informer its pod controller
	// works from.
	var pods corev1informers.PodInformer
	var podFactory informers.SharedInformerFactory
	if sh.pods != nil {
		pods = sh.pods.For(name)
	} else {
		podFactory = informers.NewSharedInformerFactoryWithOptions(client, o.Client.FullResyncPeriod,
			nodeutil.PodInformerFilter(name), informers.WithTransform(nodeutil.TrimPodsWith(sh.interner)))
		pods = podFactory.Core().V1().Pods()
	}
	initProvider, err := provider.Get(o.Provider.Name)
	if err != nil {
		return nil, node.Capabilities{}, err
	}
	// The pod controller and the provider record on the node's pods alike.
	recorder := sh.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "virtual-kubelet", Host: name})
	initCfg := provider.InitConfig{
		ConfigPath:      o.Provider.Config,
		StageConfigs:    o.Provider.StageConfigs,
		WatchStages:     o.Provider.WatchStages,
		NodeName:        name,
		OperatingSystem: o.Node.OperatingSystem,
		InternalIP:      nodeIP,
		DaemonPort:      port,
		ClusterDomain:   o.Client.ClusterDomain,
		ResourceManager: &provider.ResourceManager{
			Pods:       pods.Lister(),
			PodsSynced: pods.Informer().HasSynced,
			ConfigMaps: core.ConfigMaps().Lister(),
			Secrets:    core.Secrets().Lister(),
			Services:   core.Services().Lister(),
		},
		KubeClient:       client,
		DynamicInformers: sh.dynamic,
		EventRecorder:    recorder,
		PodSyncWorkers:   o.workersPerNode(),
		Interner:         sh.interner,
	}
	if sh.nodeWatch != nil {
		initCfg.NodeWatch, initCfg.NodeLister = sh.nodeWatch, sh.nodes
	}
	p, err := initProvider(ctx, initCfg)
	if err != nil {
		if o.Node.NodeCount > 1 {
			return nil, node.Capabilities{}, fmt.Errorf("provider %s for node %s: %w", o.Provider.Name, name, err)
		}
		return nil, node.Capabilities{}, fmt.Errorf("provider %s: %w", o.Provider.Name, err)
	}
	caps := node.CapabilitiesOf(p)
	if fence := ha.FenceOf(ctx); fence != nil {
		// A replica's node: once its holder lease is lost, every call
		// that changes what the backend runs is refused, as its API
		// writes are (ha.FencedTransport).
		caps = caps.Guarded(fence.Guard)
	}
	labels := node.NewNodeLabelGuard(name)
	var spec *corev1.Node
	if from != nil {
		spec = managedSpec(ctx, from, p)
	} else {
		spec = nodeSpec(ctx, o, name, p, caps.Decorator, labels)
	}
	spec.Status.RuntimeHandlers = caps.Runtime.RuntimeHandlers()
	cfg := nodeutil.Config{
		Client:               client,
		Node:                 spec,
		Capabilities:         &caps,
		Workers:              o.workersPerNode(),
		InformerResyncPeriod: o.Client.FullResyncPeriod,
		DisableLease:         !o.Node.EnableNodeLease,
		InformerFactory:      sh.nodeInformers(),
		PodInformerFactory:   podFactory,
		EventRecorder:        recorder,
		// Nodes sharing the process's watches are many (--node-count,
		// --manage-*, replicas), and an idle one needs no pod controller.
		PodControllerOnDemand: sh.pods != nil,
		ConfigurePodController: func(c *node.PodControllerConfig) {
			c.ProviderCallObserver = metrics.ObserveProviderCall
			c.QueueMetrics = metrics.QueueMetrics
			if sh.objects != nil {
				sh.objects.Configure(c)
			}
			if sh.nodes != nil {
				c.PodCIDRs = nodeutil.NodePodCIDRsFromLister(sh.nodes, name)
			}
		},
	}
	cfg.NodeOptions = append(cfg.NodeOptions, node.WithNodeStatusUpdateInterval(o.Node.StatusReportFrequency), node.WithNodeLabelGuard(labels),
		node.WithNodeInterner(sh.interner))
	if from != nil {
		cfg.NodeOptions = append(cfg.NodeOptions, node.WithExistingNode())
	}
	if sh.pods != nil {
		cfg.PodInformer = pods
		cfg.NodeOptions = append(cfg.NodeOptions, node.WithNodeWatch(sh.nodeWatch))
	}
	n, err := nodeutil.New(cfg)
	return n, caps, err
}

// The label every Node of the daemon carries; many nodes of one process
// watch their Nodes by it.
const (
	nodeTypeLabel = "type"
	nodeTypeValue = "virtual-kubelet"
)

// nodeSpec is the Node the daemon registers: what schedulers and users
// select on, what the provider says the node has (with a decorator d, its
// labels as labels allows, and its taints), and where its kubelet API is.
func nodeSpec(ctx context.Context, o *Options, name string, p node.Provider, d node.NodeDecorator, labels *node.NodeLabelGuard) *corev1.Node {
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Annotations: o.nodeAnnotations(name),
			Labels: map[string]string{
				nodeTypeLabel:                      nodeTypeValue,
				"kubernetes.io/role":               "agent",
				corev1.LabelHostname:               name,
				corev1.LabelOSStable:               strings.ToLower(p.OperatingSystem()),
				corev1.LabelArchStable:             runtime.GOARCH,
				"node.kubernetes.io/instance-type": "virtual-kubelet",
			},
		},
		Status: nodeStatus(ctx, p),
	}
	if !o.Node.DisableTaint {
		value := o.Node.TaintValue
		if value == "" {
			value = o.Provider.Name
		}
		n.Spec.Taints = []corev1.Taint{{Key: o.Node.TaintKey, Value: value, Effect: corev1.TaintEffect(o.Node.TaintEffect)}}
	}
	if d != nil {
		proposed := maps.Clone(n.Labels)
		maps.Copy(proposed, d.NodeLabels())
		n.Labels = labels.Restrict(ctx, n.Labels, proposed)
		n.Spec.Taints = append(n.Spec.Taints, d.NodeTaints()...)
	}
	n.Labels[nodeTypeLabel] = nodeTypeValue // ours: the daemon finds its Nodes by it
	return n
}

// nodeStatus is the status the daemon writes for a node of provider p:
// what the provider says the node has and where its kubelet API is.
func nodeStatus(ctx context.Context, p node.Provider) corev1.NodeStatus {
	capacity := p.Capacity(ctx)
	status := corev1.NodeStatus{
		Capacity:    capacity,
		Allocatable: capacity.DeepCopy(),
		Conditions:  p.NodeConditions(ctx),
		Addresses:   p.NodeAddresses(ctx),
		// Our kubelet API speaks WebSocket for exec, attach and
		// port-forward: the API server need not translate to SPDY.
		// The pod controller resizes pod-level resources in place.
		// The API server wants the list sorted.
		DeclaredFeatures: []string{"ExtendWebSocketsToKubelet", "InPlacePodLevelResourcesVerticalScaling"},
		NodeInfo: corev1.NodeSystemInfo{
			OperatingSystem: p.OperatingSystem(),
			Architecture:    runtime.GOARCH,
			KubeletVersion:  version.KubeletVersion(),
		},
	}
	if ep := p.NodeDaemonEndpoints(ctx); ep != nil {
		status.DaemonEndpoints = *ep
	}
	return status
}
