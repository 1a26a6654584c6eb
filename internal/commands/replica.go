package commands

import (
	"context"
	"errors"
	"fmt"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"os"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utilrand "k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"

	"github.com/vkubelet/virtual-kubelet/internal/ha"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

// runReplica runs the daemon as one of the replicas sharing its nodes
// (--leader-elect): each node is served, by serveNode, only while this
// replica holds the node's holder lease (package ha). It returns once ctx
// ends or a server fails, after every node it served has stopped and its
// lease was released; cancel ends ctx.
func runReplica(ctx context.Context, cancel context.CancelFunc, o *Options, client kubernetes.Interface, restCfg *rest.Config, nodeIP string, sh *shared) (err error) {
	le := &o.LeaderElect
	leaseClient, err := leaseClientFor(restCfg, len(o.Node.NodeNames()), le.RetryPeriod)
	if err != nil {
		return err
	}
	cfg := ha.Config{
		Client:        leaseClient,
		Namespace:     le.namespace(),
		Identity:      replicaIdentity(),
		Nodes:         o.Node.NodeNames(),
		Group:         ha.GroupOf(o.Node.NodeName),
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
	}
	ctx = log.WithLogger(ctx, log.G(ctx).WithField("replica", cfg.Identity))
	members, err := ha.StartMembers(ctx, cfg)
	if err != nil {
		return err
	}
	servers, err := startServers(ctx, &o.Server, &o.Node, client, restCfg, nodeIP, o.podRouting(sh))
	if err != nil {
		cancel()
		members.Wait()
		return err
	}
	defer servers.shutdown(shutdownTimeout)
	names := o.Node.NodeNames()
	log.G(ctx).WithField("namespace", cfg.Namespace).Infof("replica of %d node%s: holding those it is preferred for", len(names), plural(len(names), "", "s"))

	starts := make(startGate, maxConcurrentStarts)
	var holders sync.WaitGroup
	defer func() {
		cancel()
		holders.Wait()
		members.Wait()
	}()
	for i, name := range names {
		port := o.kubeletPort(i)
		holders.Add(1)
		go func() {
			defer holders.Done()
			ha.Hold(ctx, members, name, func(ctx context.Context) error {
				return serveNode(withNode(ctx, name), o, name, port, nodeIP, sh, servers, starts)
			})
		}()
	}
	select {
	case <-ctx.Done():
		log.G(ctx).Info("shutting down: handing the nodes over")
		return nil
	case err := <-servers.errs:
		return err
	}
}

// leaseClientFor is the client of the replica's leases, apart from the
// nodes' own: renewals must not queue behind pod and status traffic in the
// shared rate limiter, or a busy replica's fences come down and its nodes
// churn between replicas. Its limits let every node's holder lease and the
// replica's own be written once per retry period, twice over.
func leaseClientFor(restCfg *rest.Config, nodes int, retry time.Duration) (kubernetes.Interface, error) {
	cfg := rest.CopyConfig(restCfg)
	cfg.RateLimiter = nil // its own limits, not the nodes' client's
	writes := float64(nodes + 1)
	cfg.QPS = float32(2 * writes / retry.Seconds())
	cfg.Burst = 2 * (nodes + 1)
	cfg.UserAgent += " leases"
	return kubernetes.NewForConfig(cfg)
}

// maxConcurrentStarts is how many nodes one replica brings up at once.
// Taking a share of a thousand nodes (at start, or a dead replica's) would
// otherwise send thousands of registration requests at once, and the API
// server, swamped, would answer the replica's own holder lease renewals
// past their renew deadline: fences would come down and the nodes churn.
const maxConcurrentStarts = 32

// startGate bounds the node start-ups in flight: a slot is taken before a
// node is built and given back once it is Ready or has stopped.
type startGate chan struct{}

// enter waits for a slot until ctx ends; leave gives it back, once
// however often it is called.
func (g startGate) enter(ctx context.Context) (leave func(), err error) {
	select {
	case g <- struct{}{}:
		return sync.OnceFunc(func() { <-g }), nil
	case <-ctx.Done():
		return nil, context.Cause(ctx)
	}
}

// serveNode serves one node until ctx ends or it fails (startNode), and
// returns once everything it started has stopped.
func serveNode(ctx context.Context, o *Options, name string, port int32, nodeIP string, sh *shared, servers *servers, starts startGate) error {
	n, release, err := startNode(ctx, o, name, port, nodeIP, sh, servers, starts, nil)
	if err != nil {
		return err
	}
	<-n.Done()
	release()
	return n.Err()
}

// prepareNode is what a managed node's start-up does first, in its slot of
// the start gate: it returns the Node to build from (buildNode) and what
// undoes the step once the node stops.
type prepareNode func(ctx context.Context) (from *corev1.Node, undo func(), err error)

// startNode starts one node: its provider, its Node and pod controllers,
// and its kubelet API on port. It returns once the node is up, brought up
// through starts; the node then runs until ctx ends or it fails, and
// release, called once n.Done is closed, stops the rest. With
// --startup-timeout, a node not up within it from the takeover is an
// error, which hands the node over. prepare, for a managed node, runs in
// the start's slot; nil for a registered one.
func startNode(ctx context.Context, o *Options, name string, port int32, nodeIP string, sh *shared, servers *servers, starts startGate, prepare prepareNode) (n *nodeutil.Node, release func(), err error) {
	var deadline time.Time
	if t := o.Node.StartupTimeout; t > 0 {
		deadline = time.Now().Add(t)
	}
	leave, err := starts.enter(ctx)
	if err != nil {
		return nil, nil, err
	}
	defer leave() // the node is up or has failed
	var from *corev1.Node
	undo := func() {}
	if prepare != nil {
		if from, undo, err = prepare(ctx); err != nil {
			return nil, nil, err
		}
	}
	defer func() {
		if err != nil {
			undo()
		}
	}()
	if sh.pods != nil && ha.FenceOf(ctx) != nil {
		// Another replica may have served the node while this one's watch
		// was behind: act only on a cache that has caught up.
		if err := sh.pods.WaitCaughtUp(ctx, sh.client, name); err != nil {
			return nil, nil, err
		}
	}
	n, caps, err := buildNode(ctx, o, name, port, nodeIP, sh, from)
	if err != nil {
		return nil, nil, err
	}
	stop, err := servers.kubeletAPI(ctx, name, port, nodeIP, caps)
	if err != nil {
		return nil, nil, err
	}
	up, err := startUpBy(ctx, deadline, n, fmt.Sprintf("node %s did not come up within --startup-timeout %s", name, o.Node.StartupTimeout))
	if err != nil {
		stop()
		return nil, nil, err
	}
	return n, func() { up(); stop(); undo() }, nil
}

// starter is a node that starts in the background (nodeutil.Node).
type starter interface {
	Start(ctx context.Context) error
	Done() <-chan struct{}
}

// startUpBy starts n; if n is not up by deadline (none when zero), it ends
// n's context and, once n has stopped, returns an error with the message
// late. release, called once n has stopped, frees what startUpBy holds.
func startUpBy(ctx context.Context, deadline time.Time, n starter, late string) (release func(), err error) {
	if deadline.IsZero() {
		return func() {}, n.Start(ctx)
	}
	ctx, cancel := context.WithCancel(ctx)
	timer := time.AfterFunc(time.Until(deadline), cancel)
	err = n.Start(ctx)
	if timer.Stop() {
		if err != nil {
			cancel()
		}
		return cancel, err
	}
	// The deadline came first: n stops, if it has not, with its context;
	// its own error says nothing more than late.
	<-n.Done()
	return nil, errors.New(late)
}

// serviceAccountNamespace is where a pod finds its namespace.
const serviceAccountNamespace = "/var/run/secrets/kubernetes.io/serviceaccount/namespace"

// namespace holds the replicas' leases: --leader-elect-resource-namespace,
// else the daemon's own namespace when it runs in a pod (where a Role can
// grant it leases and nothing else), else default.
func (l *LeaderElectionOptions) namespace() string {
	if l.ResourceNamespace != "" {
		return l.ResourceNamespace
	}
	if b, err := os.ReadFile(serviceAccountNamespace); err == nil {
		if ns := strings.TrimSpace(string(b)); ns != "" {
			return ns
		}
	}
	return metav1.NamespaceDefault
}

// replicaIdentity names this replica: the host name (a pod's name), made
// fit for a lease name, and a random suffix, so that a restarted replica
// is a new one.
func replicaIdentity() string {
	host, _ := os.Hostname()
	host = strings.Trim(strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, strings.ToLower(host)), "-")
	if host == "" {
		host = "replica"
	}
	if len(host) > 63 {
		host = strings.TrimRight(host[:63], "-")
	}
	return host + "-" + utilrand.String(5)
}

// processInformers is the shared informer factory as each node sees it:
// the process starts and shuts it down, not a node's Run, as nodes stop
// and start while the process runs (with --leader-elect) and the first to
// start one would otherwise stop the informers for all when it stops.
// Start starts, for the process's lifetime, the informers nodes asked for
// after the process started the others (the factory starts each once).
type processInformers struct {
	informers.SharedInformerFactory
	done <-chan struct{}
}

func (f processInformers) Start(<-chan struct{}) { f.SharedInformerFactory.Start(f.done) }
func (processInformers) Shutdown()               {}

// processDynamicInformers is the dynamic informer factory as providers see
// it, for the same reason: the process starts its informers, for its
// lifetime, and shuts them down.
type processDynamicInformers struct {
	dynamicinformer.DynamicSharedInformerFactory
	done <-chan struct{}
}

func (f processDynamicInformers) Start(<-chan struct{}) { f.DynamicSharedInformerFactory.Start(f.done) }
func (processDynamicInformers) Shutdown()               {}
