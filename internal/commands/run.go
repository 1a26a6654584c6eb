package commands

import (
	"context"
	"fmt"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes"

	"github.com/vkubelet/virtual-kubelet/internal/ha"
	"github.com/vkubelet/virtual-kubelet/internal/logging"
	"github.com/vkubelet/virtual-kubelet/internal/metrics"
	"github.com/vkubelet/virtual-kubelet/internal/tracing"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

// shutdownTimeout bounds how long servers get to finish on SIGTERM.
const shutdownTimeout = 5 * time.Second

// Run runs the daemon until ctx ends (SIGINT/SIGTERM) or it fails: it
// connects to the API server, builds every node with its provider, serves
// their kubelet APIs, and runs them.
func Run(ctx context.Context, o *Options) error {
	ctx, stopObservability, err := observe(ctx, o)
	if err != nil {
		return err
	}
	defer stopObservability()
	// Whatever Run starts (provider, node, servers) stops when it returns,
	// on every path.
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()

	restCfg, err := restConfig(&o.Client, o.Node.NodeName)
	if err != nil {
		return err
	}
	if o.LeaderElect.LeaderElect {
		// A node's API requests are refused once its holder lease is lost.
		restCfg.Wrap(ha.FencedTransport)
	}
	limiter := o.managedLimiter(restCfg)
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	nodeIP, err := resolveNodeIP(o.Node.NodeIP)
	if err != nil {
		return err
	}
	openConnection(ctx, client)
	dyn, err := dynamic.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	sh, err := startShared(ctx, o, client, dyn)
	if err != nil {
		return err
	}
	// The shared informers stop with ctx; sh.stop waits for them.
	defer func() {
		cancel()
		sh.stop()
	}()

	if o.Node.Managed.Enabled() {
		return runManaged(ctx, cancel, o, client, restCfg, nodeIP, sh, limiter)
	}
	if o.LeaderElect.LeaderElect {
		return runReplica(ctx, cancel, o, client, restCfg, nodeIP, sh)
	}
	names := o.Node.NodeNames()
	nodes := make([]*nodeutil.Node, len(names))
	caps := make([]node.Capabilities, len(names))
	for i, name := range names {
		if nodes[i], caps[i], err = buildNode(withNode(ctx, name), o, name, o.kubeletPort(i), nodeIP, sh, nil); err != nil {
			return err
		}
	}
	if sh.pods == nil {
		metrics.RegisterPodPhases(nodes[0].PodLister())
	}
	servers, err := startServers(ctx, &o.Server, &o.Node, client, restCfg, nodeIP, o.podRouting(sh))
	if err != nil {
		return err
	}
	defer servers.shutdown(shutdownTimeout)
	for i, name := range names {
		if _, err := servers.kubeletAPI(withNode(ctx, name), name, o.kubeletPort(i), nodeIP, caps[i]); err != nil {
			return err
		}
	}
	return runNodes(ctx, cancel, nodes, nodeIP, o.Node.StartupTimeout, servers.errs)
}

// observe sets up logs and spans; the returned func flushes both.
func observe(ctx context.Context, o *Options) (context.Context, func(), error) {
	l := &o.Observability
	flushLogs, err := logging.Configure(l.LogLevel, nil)
	if err != nil {
		return ctx, nil, err
	}
	ctx = log.WithLogger(ctx, log.FromLogrus(logrus.WithFields(logrus.Fields{"node": o.Node.NodeName, "provider": o.Provider.Name})))
	stopTracing, err := tracing.Setup(tracing.Options{
		Exporters:               l.TraceExporters,
		ServiceName:             l.TraceServiceName,
		SampleRate:              l.TraceSampleRate,
		Tags:                    l.TraceTags,
		JaegerCollectorEndpoint: l.JaegerEndpoint,
		JaegerAgentEndpoint:     l.JaegerAgentEndpoint,
	})
	if err != nil {
		flushLogs()
		return ctx, nil, err
	}
	return ctx, func() { stopTracing(); flushLogs() }, nil
}

// runNodes runs the nodes until ctx ends, one of them stops, or a server
// fails, giving up if they are not all up within startupTimeout (0: no
// limit). It returns once every node has stopped.
func runNodes(ctx context.Context, cancel context.CancelFunc, nodes []*nodeutil.Node, nodeIP string, startupTimeout time.Duration, serverErrs <-chan error) error {
	running := newNodeGroup(nodes)
	for _, n := range nodes {
		go running.run(withNode(ctx, n.NodeController().Node().Name), n)
	}
	defer func() {
		cancel()
		running.wait()
	}()
	var startup <-chan time.Time
	if startupTimeout > 0 {
		startup = time.After(startupTimeout)
	}
	select {
	case <-running.allReady:
		log.G(ctx).WithField("internalIP", nodeIP).Infof("virtual node%s up", plural(len(nodes), " is", "s are"))
	case n := <-running.firstDone:
		return n.Err()
	case <-startup:
		return fmt.Errorf("the node did not come up within --startup-timeout %s", startupTimeout)
	case err := <-serverErrs:
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
	case err := <-serverErrs:
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
	return g
}

// run starts n and reports it done once it has stopped. The goroutine
// that started n ends once n is up.
func (g *nodeGroup) run(ctx context.Context, n *nodeutil.Node) {
	n.AfterStop(func() { g.firstDone <- n })
	_ = n.Start(ctx) // its error is n.Err()
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

// openConnection makes one request before the nodes start, so that their
// first burst of requests shares its HTTP/2 connection: a burst that finds
// none dials a connection per request. A failure is left to the requests
// that follow.
func openConnection(ctx context.Context, client kubernetes.Interface) {
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	if err := client.Discovery().RESTClient().Get().AbsPath("/version").Do(ctx).Error(); err != nil {
		log.G(ctx).WithError(err).Debug("the API server did not answer /version")
	}
}
