package commands

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	apiruntime "k8s.io/apimachinery/pkg/runtime"
	utilnet "k8s.io/apimachinery/pkg/util/net"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/internal/logging"
	"github.com/vkubelet/virtual-kubelet/internal/metrics"
	"github.com/vkubelet/virtual-kubelet/internal/provider"
	"github.com/vkubelet/virtual-kubelet/internal/tracing"
	"github.com/vkubelet/virtual-kubelet/internal/version"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

// shutdownTimeout bounds how long servers get to finish on SIGTERM.
const shutdownTimeout = 5 * time.Second

// Run runs the daemon until ctx ends (SIGINT/SIGTERM) or it fails.
func Run(ctx context.Context, o *Options) error {
	if err := logging.Configure(o.LogLevel, nil); err != nil {
		return err
	}
	ctx = log.WithLogger(ctx, log.FromLogrus(logrus.WithFields(logrus.Fields{"node": o.NodeName, "provider": o.Provider})))
	// Whatever Run starts (provider, node, servers) stops when it returns,
	// on every path.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stopTracing, err := tracing.Setup(tracing.Options{
		Exporters:               o.TraceExporters,
		ServiceName:             o.TraceServiceName,
		SampleRate:              o.TraceSampleRate,
		Tags:                    o.TraceTags,
		JaegerCollectorEndpoint: o.JaegerEndpoint,
		JaegerAgentEndpoint:     o.JaegerAgentEndpoint,
	})
	if err != nil {
		return err
	}
	defer stopTracing()

	restCfg, err := restConfig(o)
	if err != nil {
		return err
	}
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	nodeIP, err := resolveNodeIP(o)
	if err != nil {
		return err
	}

	factory := nodeutil.NewInformerFactory(client, o.FullResyncPeriod)
	names := o.NodeNames()
	// One node watches its own pods; many share one watch of the bound pods,
	// dispatched by node name.
	var pods *nodeutil.PodsByNode
	var deletions *nodeutil.NodeDeletions
	var objects *nodeutil.ObjectInformers
	if len(names) > 1 {
		podFactory := informers.NewSharedInformerFactoryWithOptions(client, o.FullResyncPeriod,
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.FieldSelector = "spec.nodeName!=" }),
			informers.WithTransform(nodeutil.DropManagedFields))
		if pods, err = nodeutil.NewPodsByNode(podFactory.Core().V1().Pods()); err != nil {
			return err
		}
		metrics.RegisterPodPhases(podFactory.Core().V1().Pods().Lister())
		// and one watch of their Nodes, for deletions.
		nodeFactory := informers.NewSharedInformerFactoryWithOptions(client, 0,
			informers.WithTweakListOptions(func(lo *metav1.ListOptions) { lo.LabelSelector = nodeTypeLabel + "=" + nodeTypeValue }),
			informers.WithTransform(nodeutil.DropManagedFields))
		if deletions, err = nodeutil.NewNodeDeletions(nodeFactory.Core().V1().Nodes()); err != nil {
			return err
		}
		if objects, err = nodeutil.NewObjectInformers(factory); err != nil {
			return err
		}
		podFactory.Start(ctx.Done())
		defer podFactory.Shutdown()
		nodeFactory.Start(ctx.Done())
		defer nodeFactory.Shutdown()
	}

	// One event broadcaster for all nodes: each has its own watchers and
	// a thousand-event queue, 70 MB and 2,000 goroutines at 1,000 nodes.
	events := record.NewBroadcaster()
	events.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	defer events.Shutdown()

	sh := &shared{client: client, factory: factory, pods: pods, deletions: deletions, objects: objects, events: events}
	nodes := make([]*nodeutil.Node, len(names))
	providers := make([]node.Provider, len(names))
	for i, name := range names {
		if nodes[i], providers[i], err = buildNode(withNode(ctx, name), o, name, o.ListenPort+int32(i), nodeIP, sh); err != nil {
			return err
		}
	}
	servers, err := startServers(ctx, o, client, restCfg)
	if err != nil {
		return err
	}
	defer servers.shutdown(shutdownTimeout)
	for i, name := range names {
		if err := servers.kubeletAPI(withNode(ctx, name), o, name, o.ListenPort+int32(i), nodeIP, providers[i]); err != nil {
			return err
		}
	}
	if pods == nil {
		metrics.RegisterPodPhases(nodes[0].PodLister())
	}

	running := newNodeGroup(nodes)
	for i, n := range nodes {
		go func() { _ = n.Run(withNode(ctx, names[i])) }()
	}
	defer func() {
		cancel()
		running.wait()
	}()
	var startup <-chan time.Time
	if o.StartupTimeout > 0 {
		startup = time.After(o.StartupTimeout)
	}
	select {
	case <-running.allReady:
		log.G(ctx).WithField("internalIP", nodeIP).Infof("virtual node%s up", plural(len(nodes), " is", "s are"))
	case n := <-running.firstDone:
		return n.Err()
	case <-startup:
		return fmt.Errorf("the node did not come up within --startup-timeout %s", o.StartupTimeout)
	case err := <-servers.errs:
		return err
	case <-ctx.Done():
	}

	select {
	case <-ctx.Done():
		log.G(ctx).Info("shutting down")
	case n := <-running.firstDone:
		cancel()
		running.wait()
		return n.Err()
	case err := <-servers.errs:
		return err
	}
	cancel()
	running.wait()
	return running.err()
}

// withNode names the node in the context's log fields.
func withNode(ctx context.Context, name string) context.Context {
	return log.WithLogger(ctx, log.G(ctx).WithField("node", name))
}

func plural(n int, one, many string) string {
	if n == 1 {
		return one
	}
	return many
}

// shared is what the nodes of one process have in common.
type shared struct {
	client  kubernetes.Interface
	factory informers.SharedInformerFactory // ConfigMaps, Secrets, Services
	// With one node, nil: it watches its own pods and Node.
	pods      *nodeutil.PodsByNode
	deletions *nodeutil.NodeDeletions
	objects   *nodeutil.ObjectInformers
	events    record.EventBroadcaster
}

// buildNode makes one virtual node: its provider (whose kubelet API will
// listen on port), its Node controller and pod controller.
func buildNode(ctx context.Context, o *Options, name string, port int32, nodeIP string, sh *shared) (*nodeutil.Node, node.Provider, error) {
	client := sh.client
	core := sh.factory.Core().V1()
	initProvider, err := provider.Get(o.Provider)
	if err != nil {
		return nil, nil, err
	}
	p, err := initProvider(ctx, provider.InitConfig{
		ConfigPath:      o.ProviderConfig,
		NodeName:        name,
		OperatingSystem: o.OperatingSystem,
		InternalIP:      nodeIP,
		DaemonPort:      port,
		ClusterDomain:   o.ClusterDomain,
		ResourceManager: &provider.ResourceManager{
			ConfigMaps: core.ConfigMaps().Lister(),
			Secrets:    core.Secrets().Lister(),
			Services:   core.Services().Lister(),
		},
		KubeClient: client,
	})
	if err != nil {
		if o.NodeCount > 1 {
			return nil, nil, fmt.Errorf("provider %s for node %s: %w", o.Provider, name, err)
		}
		return nil, nil, fmt.Errorf("provider %s: %w", o.Provider, err)
	}
	spec := nodeSpec(ctx, o, name, p)
	cfg := nodeutil.Config{
		Client:               client,
		Node:                 spec,
		Provider:             p,
		Workers:              o.workersPerNode(),
		InformerResyncPeriod: o.FullResyncPeriod,
		DisableLease:         !o.EnableNodeLease,
		InformerFactory:      sh.factory,
		EventRecorder:        sh.events.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "virtual-kubelet", Host: name}),
		ConfigurePodController: func(c *node.PodControllerConfig) {
			c.ProviderCallObserver = metrics.ObserveProviderCall
			if sh.objects != nil {
				sh.objects.Configure(c)
			}
		},
	}
	if sh.pods != nil {
		cfg.PodInformer = sh.pods.For(name)
		cfg.NodeOptions = append(cfg.NodeOptions, node.WithNodeDeletions(sh.deletions))
	}
	n, err := nodeutil.New(cfg)
	return n, p, err
}

// nodeGroup follows the nodes of one process: all ready, the first done.
type nodeGroup struct {
	nodes     []*nodeutil.Node
	allReady  chan struct{}
	firstDone chan *nodeutil.Node
}

func newNodeGroup(nodes []*nodeutil.Node) *nodeGroup {
	g := &nodeGroup{nodes: nodes, allReady: make(chan struct{}), firstDone: make(chan *nodeutil.Node, len(nodes))}
	go func() {
		for _, n := range nodes {
			select {
			case <-n.Ready():
			case <-n.Done():
				return
			}
		}
		close(g.allReady)
	}()
	for _, n := range nodes {
		go func() {
			<-n.Done()
			g.firstDone <- n
		}()
	}
	return g
}

// wait returns once every node has stopped.
func (g *nodeGroup) wait() {
	for _, n := range g.nodes {
		<-n.Done()
	}
}

// err is the first error a node stopped with.
func (g *nodeGroup) err() error {
	for _, n := range g.nodes {
		if err := n.Err(); err != nil {
			return err
		}
	}
	return nil
}

// restConfig loads the kubeconfig (a list, as in KUBECONFIG, is merged as
// kubectl does) or, without one, the in-cluster config.
func restConfig(o *Options) (*rest.Config, error) {
	var cfg *rest.Config
	if o.Kubeconfig == "" {
		var err error
		cfg, err = rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("no kubeconfig given (--kubeconfig or KUBECONFIG) and no in-cluster config: %v", err)
		}
	} else {
		paths := filepath.SplitList(o.Kubeconfig)
		for _, p := range paths {
			if _, err := os.Stat(p); err != nil {
				return nil, fmt.Errorf("kubeconfig: %v", err)
			}
		}
		rules := &clientcmd.ClientConfigLoadingRules{Precedence: paths}
		var err error
		cfg, err = clientcmd.NewNonInteractiveDeferredLoadingClientConfig(rules, &clientcmd.ConfigOverrides{}).ClientConfig()
		if err != nil {
			return nil, fmt.Errorf("kubeconfig %s: %v", o.Kubeconfig, err)
		}
	}
	cfg.QPS, cfg.Burst = o.KubeAPIQPS, o.KubeAPIBurst
	if o.KubeAPIQPS == 0 {
		cfg.QPS = -1 // no client-side limit
	}
	// Built-in types come back in the requested type; JSON stays acceptable
	// for anything that has no protobuf form.
	cfg.ContentType = o.KubeAPIContentType
	cfg.AcceptContentTypes = o.KubeAPIContentType
	if o.KubeAPIContentType != apiruntime.ContentTypeJSON {
		cfg.AcceptContentTypes += "," + apiruntime.ContentTypeJSON
	}
	cfg.UserAgent = fmt.Sprintf("virtual-kubelet/%s (%s/%s) node/%s", version.Version, runtime.GOOS, runtime.GOARCH, o.NodeName)
	return cfg, nil
}

// resolveNodeIP returns --node-ip, or the address of the interface of the
// default route, as the kubelet picks it.
func resolveNodeIP(o *Options) (string, error) {
	if o.NodeIP != "" {
		return o.NodeIP, nil
	}
	ip, err := utilnet.ChooseHostInterface()
	if err != nil {
		return "", fmt.Errorf("cannot tell the node's IP: set --node-ip or VKUBELET_POD_IP (%v)", err)
	}
	return ip.String(), nil
}

// The label every Node of the daemon carries; many nodes of one process
// watch their Nodes by it.
const (
	nodeTypeLabel = "type"
	nodeTypeValue = "virtual-kubelet"
)

// nodeSpec is the Node the daemon registers: what schedulers and users
// select on, what the provider says the node has, and where its kubelet API is.
func nodeSpec(ctx context.Context, o *Options, name string, p node.Provider) *corev1.Node {
	capacity := p.Capacity(ctx)
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				nodeTypeLabel:                      nodeTypeValue,
				"kubernetes.io/role":               "agent",
				corev1.LabelHostname:               name,
				corev1.LabelOSStable:               strings.ToLower(p.OperatingSystem()),
				corev1.LabelArchStable:             runtime.GOARCH,
				"node.kubernetes.io/instance-type": "virtual-kubelet",
			},
		},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity.DeepCopy(),
			Conditions:  p.NodeConditions(ctx),
			Addresses:   p.NodeAddresses(ctx),
			// Our kubelet API speaks WebSocket for exec, attach and
			// port-forward: the API server need not translate to SPDY.
			DeclaredFeatures: []string{"ExtendWebSocketsToKubelet"},
			NodeInfo: corev1.NodeSystemInfo{
				OperatingSystem: p.OperatingSystem(),
				Architecture:    runtime.GOARCH,
				KubeletVersion:  version.KubeletVersion(),
			},
		},
	}
	if ep := p.NodeDaemonEndpoints(ctx); ep != nil {
		n.Status.DaemonEndpoints = *ep
	}
	if !o.DisableTaint {
		value := o.TaintValue
		if value == "" {
			value = o.Provider
		}
		n.Spec.Taints = []corev1.Taint{{Key: o.TaintKey, Value: value, Effect: corev1.TaintEffect(o.TaintEffect)}}
	}
	if d, ok := p.(node.NodeDecorator); ok {
		for k, v := range d.NodeLabels() {
			n.Labels[k] = v
		}
		n.Spec.Taints = append(n.Spec.Taints, d.NodeTaints()...)
	}
	n.Labels[nodeTypeLabel] = nodeTypeValue // ours: the daemon finds its Nodes by it
	return n
}

// errServerFailed wraps a server that stopped on its own.
var errServerFailed = errors.New("server failed")

// listen opens a TCP listener, with a message naming the flag on failure.
func listen(flag, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s %s: %w", flag, addr, err)
	}
	return l, nil
}
