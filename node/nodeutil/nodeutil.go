// Package nodeutil wires a provider into a running virtual node: informers
// on the node's pods and on the ConfigMaps, Secrets and Services they refer
// to, an event recorder, the NodeController and the PodController.
//
//	n, err := nodeutil.New(nodeutil.Config{Client: client, Node: spec, Provider: p})
//	...
//	go n.Run(ctx)
//	<-n.Ready()
//
// NewNode does the same the way the prior virtual-kubelet project did: it
// builds the provider from the informers' listers, and with
// AttachProviderRoutes and WithTLSConfig serves the kubelet API too.
//
//	mux := http.NewServeMux()
//	n, err := nodeutil.NewNode("vk0", newProvider, nodeutil.WithClient(client),
//		nodeutil.AttachProviderRoutes(mux),
//		nodeutil.WithTLSConfig(nodeutil.WithKeyPairFromPath(certFile, keyFile)))
package nodeutil

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	corev1informers "k8s.io/client-go/informers/core/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/intern"
	"github.com/vkubelet/virtual-kubelet/node/internal/runonce"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// Config says how to build a Node.
type Config struct {
	// Client talks to the API server. Required.
	Client kubernetes.Interface
	// Node is the Node object to register: name, labels, taints and
	// initial status. Required.
	Node *corev1.Node
	// Provider runs the pods. Required unless Capabilities is set.
	Provider node.PodLifecycleHandler
	// Capabilities, if set, is what the node uses of the provider, in
	// place of node.CapabilitiesOf(Provider): for a caller that resolved
	// them once to share (its kubelet API, its Node's labels) or Guarded
	// them. Provider is then not used.
	Capabilities *node.Capabilities
	// NodeProvider keeps the node alive; it defaults to
	// Capabilities.NodeProviderFor(Node).
	NodeProvider node.NodeProvider

	// Workers is the number of workers for each pod queue (default 10).
	Workers int
	// InformerResyncPeriod is the informers' resync period (default none).
	InformerResyncPeriod time.Duration
	// DisableLease turns the coordination.k8s.io/v1 node lease off: the
	// heartbeat is then the node status, written at the ping interval.
	DisableLease bool
	// LeaseDurationSeconds defaults to node.DefaultLeaseDuration.
	LeaseDurationSeconds int32
	// NodeOptions are passed to node.NewNodeController after the lease option.
	NodeOptions []node.NodeControllerOpt
	// ConfigurePodController, if set, can adjust the pod controller's
	// config (rate limiters, retry policies, intervals) before it is built.
	ConfigurePodController func(*node.PodControllerConfig)
	// TransformPods, if set, is the pod informer's transform function; by
	// default TrimPodsWith an Interner of the node's own. Nodes of one
	// process share more with TrimPodsWith one Interner.
	TransformPods cache.TransformFunc
	// InformerFactory, if set, provides the ConfigMap, Secret and Service
	// informers, so a provider can share them; Run starts it and shuts it
	// down when it returns. By default a factory of its own is made.
	InformerFactory informers.SharedInformerFactory
	// PodInformerFactory, if set, provides the pod informer, so a provider
	// can share its lister; it must hold only the node's pods (see
	// PodInformerFilter). Run starts it and shuts it down when it returns.
	// TransformPods does not apply to it.
	PodInformerFactory informers.SharedInformerFactory
	// PodInformer, if set, is the pod informer; the caller starts it. It
	// must show only the node's pods, as PodsByNode.For does for nodes
	// sharing one informer. PodInformerFactory and TransformPods do not
	// apply to it.
	PodInformer corev1informers.PodInformer
	// EventRecorder, if set, records the pod controller's events instead
	// of a recorder of the Node's own.
	EventRecorder record.EventRecorder
	// PodControllerOnDemand builds and starts the pod controller at the
	// node's first pod rather than at Start, when neither Kubernetes nor
	// the provider has a pod of the node then: a process with many idle
	// nodes keeps no controller for them. PodController is nil until then.
	PodControllerOnDemand bool
}

// Node is a provider wired to the API server as a node.
type Node struct {
	cfg        Config
	podFactory informers.SharedInformerFactory // nil when Config.PodInformer is set
	pods       corev1informers.PodInformer
	refFactory informers.SharedInformerFactory
	broadcast  record.EventBroadcaster

	nodeController *node.NodeController
	// podController is nil until the controller is built: at New, or at
	// the node's first pod with PodControllerOnDemand (see onDemand).
	podController atomic.Pointer[node.PodController]
	onDemand      *podsOnDemand
	// devices publishes the provider's devices; nil without any.
	devices *DevicePublisher
	// serve, if set, runs the kubelet API server until ctx ends.
	serve func(ctx context.Context) error

	ready chan struct{}
	// run is the node's end: Done, Err and AfterStop.
	run *runonce.Once
	mu  sync.Mutex
	// serveErr is what the kubelet API server returned.
	serveErr error
}

// New builds a Node; nothing is started and nothing is written until Run
// or Start.
func New(cfg Config) (*Node, error) {
	if cfg.Client == nil || cfg.Node == nil || cfg.Node.Name == "" || (cfg.Provider == nil && cfg.Capabilities == nil) {
		return nil, errors.New("nodeutil: Client, Node (with a name) and Provider (or Capabilities) are required")
	}
	if cfg.Capabilities == nil {
		caps := node.CapabilitiesOf(cfg.Provider)
		cfg.Capabilities = &caps
	}
	if cfg.Capabilities.Pods == nil {
		return nil, errors.New("nodeutil: Capabilities.Pods is required")
	}
	if cfg.Workers == 0 {
		cfg.Workers = 10
	}
	if cfg.Workers < 0 {
		return nil, fmt.Errorf("nodeutil: Workers must be positive, got %d", cfg.Workers)
	}
	if cfg.NodeProvider == nil {
		cfg.NodeProvider = cfg.Capabilities.NodeProviderFor(cfg.Node)
	}
	transform := cfg.TransformPods
	if transform == nil {
		transform = TrimPodsWith(intern.New())
	}

	n := &Node{cfg: cfg, ready: make(chan struct{}), run: runonce.New(), pods: cfg.PodInformer}
	if n.pods == nil {
		n.podFactory = cfg.PodInformerFactory
		if n.podFactory == nil {
			n.podFactory = informers.NewSharedInformerFactoryWithOptions(cfg.Client, cfg.InformerResyncPeriod,
				PodInformerFilter(cfg.Node.Name), informers.WithTransform(transform))
		}
		n.pods = n.podFactory.Core().V1().Pods()
	}
	n.refFactory = cfg.InformerFactory
	if n.refFactory == nil {
		n.refFactory = NewInformerFactory(cfg.Client, cfg.InformerResyncPeriod)
	}

	recorder := cfg.EventRecorder
	if recorder == nil {
		n.broadcast = record.NewBroadcaster()
		recorder = n.broadcast.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "virtual-kubelet", Host: cfg.Node.Name})
	}

	opts := []node.NodeControllerOpt{}
	if !cfg.DisableLease {
		opts = append(opts, node.WithNodeEnableLeaseV1(NodeLeaseV1Client(cfg.Client), cfg.LeaseDurationSeconds))
	}
	opts = append(opts, cfg.NodeOptions...)
	var err error
	n.nodeController, err = node.NewNodeController(cfg.NodeProvider, cfg.Node, cfg.Client.CoreV1().Nodes(), opts...)
	if err != nil {
		return nil, err
	}

	core := n.refFactory.Core().V1()
	pcc := node.PodControllerConfig{
		PodClient:         cfg.Client.CoreV1(),
		PodInformer:       n.pods,
		ConfigMapInformer: core.ConfigMaps(),
		SecretInformer:    core.Secrets(),
		ServiceInformer:   core.Services(),
		ObjectClient:      cfg.Client.CoreV1(),
		ClaimClient:       cfg.Client.ResourceV1(),
		EventRecorder:     recorder,
		Provider:          cfg.Capabilities.Pods,
		Capabilities:      cfg.Capabilities,
		Node:              n.nodeController.Node,
		PodCIDRs:          NodePodCIDRs(cfg.Client.CoreV1().Nodes(), cfg.Node.Name),
		// Tokens of projected service-account volumes, for providers
		// with the volumes capability.
		ServiceAccountClient: cfg.Client.CoreV1(),
	}
	if d := cfg.Capabilities.Devices; d != nil {
		pcc.ResourceClaimInformer = n.refFactory.Resource().V1().ResourceClaims()
		n.devices = NewDevicePublisher(cfg.Client, cfg.Node.Name, d)
	}
	if cfg.ConfigurePodController != nil {
		cfg.ConfigurePodController(&pcc)
	}
	if cfg.PodControllerOnDemand {
		if err := pcc.Validate(); err != nil {
			return nil, err
		}
		n.onDemand = newPodsOnDemand(pcc)
	} else {
		pc, err := node.NewPodController(pcc)
		if err != nil {
			return nil, err
		}
		n.podController.Store(pc)
	}
	// The node controller keeps the node; a thousand nodes need not keep
	// a second copy each.
	n.cfg.Node = nil
	return n, nil
}

// NewInformerFactory returns an informer factory over all namespaces whose
// caches leave out managed fields.
func NewInformerFactory(client kubernetes.Interface, resync time.Duration) informers.SharedInformerFactory {
	return informers.NewSharedInformerFactoryWithOptions(client, resync, informers.WithTransform(DropManagedFields))
}

// DropManagedFields is an informer transform that trims what the caches
// keep: nothing here reads managed fields, and they are a large share of
// every object.
func DropManagedFields(obj any) (any, error) {
	if m, ok := obj.(metav1.Object); ok {
		m.SetManagedFields(nil)
	}
	return obj, nil
}

// Run registers the node, starts the informers and both controllers, and
// blocks until ctx ends or a controller fails; it then stops everything and
// waits for it to stop.
func (n *Node) Run(ctx context.Context) error {
	if err := n.Start(ctx); err != nil {
		return err
	}
	<-n.run.Done()
	return n.Err()
}

// Start does what Run does but returns once the node is ready (Ready is
// closed), or with the error that kept it from starting; if ctx ends first,
// it returns nil with the node stopped. The node runs until ctx ends or a
// controller fails: Done is closed once everything has stopped, and Err
// says why. Start and Run are called once, one of them.
//
// No goroutine is held while the node runs, the caller's or one of its
// own, and with AfterStop none need wait for it to stop: a process with
// many idle nodes keeps no goroutine for them.
func (n *Node) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	// What Start has started, stopped in reverse once the node ends.
	stops := []func(){cancel}
	if n.broadcast != nil {
		n.broadcast.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: n.cfg.Client.CoreV1().Events("")})
		stops = append(stops, n.broadcast.Shutdown)
	}
	var wg sync.WaitGroup
	stops = append(stops, wg.Wait)
	failed := func(err error) error {
		n.finish(stops, err)
		return err
	}

	// Whatever stops (the server, either controller) ends ctx, which
	// stops the rest: a pod controller still waiting for its caches is
	// cut short, and a ready node finishes (see below).
	if n.serve != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			n.served(n.serve(ctx))
			cancel()
		}()
	}
	// Neither controller has a goroutine of its own while idle: the node
	// controller runs on a timer until ctx ends, and the pod controller
	// starts below (or at the node's first pod, PodControllerOnDemand),
	// once its caches are synced, and stops when ctx ends.
	if err := n.nodeController.Start(ctx); err != nil {
		cancel() // before the wait for the server
		return failed(err)
	}
	n.nodeController.AfterStop(cancel)
	stops = append(stops, func() { <-n.nodeController.Done() }, n.podsStopped)

	if n.podFactory != nil {
		n.podFactory.Start(ctx.Done())
		stops = append(stops, n.podFactory.Shutdown)
	}
	n.refFactory.Start(ctx.Done())
	stops = append(stops, n.refFactory.Shutdown, cancel)
	// startFailed is what Start returns when the pod controller did not
	// start: cut short by a failing server or node controller, whose
	// error is the one to return, or by ctx ending: no error.
	startFailed := func(err error) error {
		if err := n.serverErr(); err != nil {
			return failed(err)
		}
		if err := n.nodeControllerErr(); err != nil || ctx.Err() != nil {
			return failed(err)
		}
		return failed(fmt.Errorf("pod controller: %w", err))
	}
	lazy := false
	if n.onDemand != nil {
		idle, ok := n.idle(ctx)
		if !ok {
			return startFailed(context.Cause(ctx))
		}
		lazy = idle
	}
	waitFor := []interface {
		Ready() <-chan struct{}
		Done() <-chan struct{}
	}{n.nodeController}
	if lazy {
		if err := n.awaitFirstPod(func() { n.startOnDemand(ctx, cancel) }); err != nil {
			return startFailed(err)
		}
	} else {
		pc, err := n.startPods(ctx, cancel)
		if err != nil {
			return startFailed(err)
		}
		waitFor = append(waitFor, pc)
	}

	for _, c := range waitFor {
		select {
		case <-c.Ready():
		case <-c.Done():
			return failed(n.firstErr())
		case <-ctx.Done():
			return failed(n.firstErr())
		}
	}
	log.G(ctx).WithField("node", n.nodeController.Node().Name).Info("node is ready")
	close(n.ready)
	if n.devices != nil {
		// The Node is registered: its slices can name it as their owner.
		wg.Add(1)
		go func() { defer wg.Done(); n.devices.Run(ctx) }()
	}
	// No goroutine waits on a ready node: its end is ctx's.
	context.AfterFunc(ctx, func() { n.finish(stops, n.firstErr()) })
	return nil
}

// served records what the kubelet API server returned: once it stops, the
// node stops, with its error.
func (n *Node) served(err error) {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.serveErr = err
}

// serverErr is what the kubelet API server returned, nil while it serves.
func (n *Node) serverErr() error {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.serveErr
}

// finish stops, in reverse, what Start started, and then ends the node
// with err.
func (n *Node) finish(stops []func(), err error) {
	for i := len(stops) - 1; i >= 0; i-- {
		stops[i]()
	}
	n.run.Finish(err)
}

// AfterStop arranges for f to run on a goroutine of its own once the node
// has stopped (Done is closed), or at once if it has. Like
// context.AfterFunc, it lets a caller follow many nodes without a
// goroutine waiting on each.
func (n *Node) AfterStop(f func()) { n.run.AfterFinish(f) }

// firstErr is why the node stops: the server's error, the node
// controller's or the pod controller's, in that order; nil when ctx ended.
func (n *Node) firstErr() error {
	if err := n.serverErr(); err != nil {
		return err
	}
	if err := n.nodeControllerErr(); err != nil {
		return err
	}
	if n.onDemand != nil {
		if err := n.onDemand.startErr(); err != nil {
			return err
		}
	}
	if pc := n.podController.Load(); pc != nil {
		select {
		case <-pc.Done():
			if err := pc.Err(); err != nil {
				return fmt.Errorf("pod controller: %w", err)
			}
		default:
		}
	}
	return nil
}

// podsStopped waits for the pod controller to stop, if it was started, and
// keeps one from starting on demand once the node stops.
func (n *Node) podsStopped() {
	if n.onDemand != nil {
		n.onDemand.close(n.pods.Informer())
	}
	if pc := n.podController.Load(); pc != nil {
		<-pc.Done()
	}
}

// nodeControllerErr is the node controller's error once it has stopped
// with one; nil while it runs.
func (n *Node) nodeControllerErr() error {
	select {
	case <-n.nodeController.Done():
		if err := n.nodeController.Err(); err != nil {
			return fmt.Errorf("node controller: %w", err)
		}
	default:
	}
	return nil
}

// PodLister reads the pods bound to the node from the informer's cache.
func (n *Node) PodLister() corev1listers.PodLister {
	return n.pods.Lister()
}

// NodeController returns the node's NodeController.
func (n *Node) NodeController() *node.NodeController { return n.nodeController }

// PodController returns the node's PodController, for its queue lengths or
// enqueue methods; nil while a PodControllerOnDemand node has had no pod.
func (n *Node) PodController() *node.PodController { return n.podController.Load() }

// WaitReady waits until the node is ready, and fails if Run returned first,
// ctx ended or timeout (when positive) passed.
func (n *Node) WaitReady(ctx context.Context, timeout time.Duration) error {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	// A node that was ready and has stopped since was ready: look at
	// ready first, as select picks among ready cases at random.
	select {
	case <-n.ready:
		return nil
	default:
	}
	select {
	case <-n.ready:
		return nil
	case <-n.run.Done():
		select {
		case <-n.ready: // it was ready before it stopped
			return nil
		default:
		}
		if err := n.Err(); err != nil {
			return fmt.Errorf("node stopped before it was ready: %w", err)
		}
		return errors.New("node stopped before it was ready")
	case <-ctx.Done():
		return fmt.Errorf("waiting for the node to be ready: %w", context.Cause(ctx))
	}
}

// Ready is closed once the node is registered and the pod controller runs,
// or, with PodControllerOnDemand and no pod yet, waits for the first pod.
func (n *Node) Ready() <-chan struct{} { return n.ready }

// Done is closed once the node has stopped: Run has returned, or what
// Start started has stopped.
func (n *Node) Done() <-chan struct{} { return n.run.Done() }

// Err is why the node stopped (Run's error), once Done is closed.
func (n *Node) Err() error { return n.run.Result() }
