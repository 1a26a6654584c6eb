package commands

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/workqueue"

	"github.com/vkubelet/virtual-kubelet/internal/ha"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// managedNodeWorkers is each managed node's share of pod sync workers: a
// managed node is one of many (hundreds or thousands, as kwok's users run
// them), each with its own queues, and --pod-sync-workers for each would
// hold tens of thousands of idle goroutines.
const managedNodeWorkers = 4

// managedSyncWorkers start and stop managed nodes at once; a stop waits for
// the node's kubelet API to shut down.
const managedSyncWorkers = 4

// managedLeaseBudget is how many nodes the lease client of a replica of
// managed nodes is sized for (leaseClientFor): their number is not known
// at start.
const managedLeaseBudget = 1000

// nodeListOptions narrow the process's watch of Nodes: to those it
// registers, by their label, or with --manage-*, to those it manages, as
// far as the API server filters (annotations are filtered here).
func nodeListOptions(n *NodeOptions) func(*metav1.ListOptions) {
	if s, err := n.Managed.selector(); err == nil && n.Managed.Enabled() {
		return s.listOptions
	}
	return func(lo *metav1.ListOptions) { lo.LabelSelector = nodeTypeLabel + "=" + nodeTypeValue }
}

// managedSpec is what the daemon writes of from, a Node someone else
// created: the status only (node.WithExistingNode), the provider's
// conditions, node info and kubelet endpoint, and capacity, allocatable
// and addresses only where the Node has none or has the daemon's, so that
// the creator's stay theirs. A replica taking the node over writes what the
// last one wrote, under the same field manager: were it to leave a field
// out because the Node has it, server-side apply would remove it. Its node
// info names the architecture and OS of from's labels. from must have its
// managed fields (a Get, not the informer's trimmed copy).
func managedSpec(ctx context.Context, from *corev1.Node, p node.Provider) *corev1.Node {
	status := nodeStatus(ctx, p)
	if len(from.Status.Capacity) > 0 && !ownedByUs(from, "f:capacity") {
		status.Capacity = nil
	}
	if (len(from.Status.Allocatable) > 0 && !ownedByUs(from, "f:allocatable")) || status.Capacity == nil {
		// The API server defaults allocatable to capacity.
		status.Allocatable = nil
	}
	if len(from.Status.Addresses) > 0 && !ownedByUs(from, "f:addresses") {
		status.Addresses = nil
	}
	if arch := from.Labels[corev1.LabelArchStable]; arch != "" {
		status.NodeInfo.Architecture = arch
	}
	if os := from.Labels[corev1.LabelOSStable]; os != "" {
		status.NodeInfo.OperatingSystem = os
	}
	return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: from.Name}, Status: status}
}

// ownedByUs reports whether the daemon's field manager set status field
// (such as "f:addresses") of n. A field the creator set when it created
// the Node has no manager at all (the API server resets status fields
// on create, and records none), so a field present is another's unless
// it is ours.
func ownedByUs(n *corev1.Node, field string) bool {
	for _, m := range n.ManagedFields {
		if m.Manager != node.FieldManager || m.FieldsV1 == nil {
			continue
		}
		var fields struct {
			Status map[string]json.RawMessage `json:"f:status"`
		}
		if err := json.Unmarshal(m.FieldsV1.GetRawBytes(), &fields); err != nil {
			continue
		}
		if _, ok := fields.Status[field]; ok {
			return true
		}
	}
	return false
}

// runManaged runs the daemon for the Nodes others create (--manage-*):
// each Node that matches is served from when the process sees it until it
// is deleted, by this process alone or, with --leader-elect, by the
// replica holding it. It returns once ctx ends or a server fails, after
// every node has stopped; cancel ends ctx.
// limiter, when not nil, scales the client's limits with the nodes served.
func runManaged(ctx context.Context, cancel context.CancelFunc, o *Options, client kubernetes.Interface, restCfg *rest.Config, nodeIP string, sh *shared, limiter *managedLimiter) error {
	selector, err := o.Node.Managed.selector()
	if err != nil {
		return err
	}
	var members *ha.Members
	if o.LeaderElect.LeaderElect {
		if members, err = startReplicaMembers(ctx, o, restCfg); err != nil {
			return err
		}
		ctx = log.WithLogger(ctx, log.G(ctx).WithField("replica", members.Identity()))
	}
	servers, err := startServers(ctx, &o.Server, &o.Node, client, restCfg, nodeIP, o.podRouting(sh))
	if err != nil {
		cancel()
		if members != nil {
			members.Wait()
		}
		return err
	}
	defer servers.shutdown(shutdownTimeout)

	starts := make(startGate, maxConcurrentStarts)
	serve := func(ctx context.Context, n managedRef, port int32, stopped func(error)) error {
		started, release, err := startNode(withNode(ctx, n.Name), o, n.Name, port, nodeIP, sh, servers, starts, managedPrepare(client, o, n))
		if err != nil {
			return err
		}
		started.AfterStop(func() {
			release()
			stopped(started.Err())
		})
		return nil
	}
	if members != nil {
		serve = holdManaged(members, client, serve)
	}
	m := newManagedNodes(selector, sh.nodes, o.managedPorts(), serve)
	m.served = limiter.setNodes
	if _, err := sh.nodeInformer.AddEventHandler(m.handler()); err != nil {
		return err
	}
	log.G(ctx).Info("managing the Nodes that match --manage-*: registering none")
	done := make(chan struct{})
	go func() {
		defer close(done)
		m.run(ctx)
	}()
	defer func() {
		cancel()
		<-done
		if members != nil {
			members.Wait()
		}
	}()
	select {
	case <-ctx.Done():
		log.G(ctx).Info("shutting down: stopping the managed nodes")
		return nil
	case err := <-servers.errs:
		return err
	}
}

// managedPrepare is the start-up's first step for managed Node n, taken
// with a slot of the start gate: it reads n afresh, with the managed fields
// that say what is whose, and applies the listener's annotations; undo
// takes them off.
func managedPrepare(client kubernetes.Interface, o *Options, n managedRef) prepareNode {
	return func(ctx context.Context) (*corev1.Node, func(), error) {
		fresh, err := client.CoreV1().Nodes().Get(ctx, n.Name, metav1.GetOptions{})
		switch {
		case apierrors.IsNotFound(err) || err == nil && fresh.UID != n.UID:
			return nil, nil, fmt.Errorf("node %s: %w", n.Name, node.ErrNodeDeleted)
		case err != nil:
			return nil, nil, err
		}
		undo := func() {}
		if annotations := o.nodeAnnotations(n.Name); annotations != nil {
			if undo, err = applyListenerAnnotations(ctx, client, fresh, annotations); err != nil {
				return nil, nil, err
			}
		}
		return fresh, undo, nil
	}
}

// startReplicaMembers announces this replica among those sharing the
// managed Nodes of its --nodename: the node set is empty at start and
// follows the Nodes (ha.Members.AddNode).
func startReplicaMembers(ctx context.Context, o *Options, restCfg *rest.Config) (*ha.Members, error) {
	le := &o.LeaderElect
	leaseClient, err := leaseClientFor(restCfg, managedLeaseBudget, le.RetryPeriod)
	if err != nil {
		return nil, err
	}
	return ha.StartMembers(ctx, ha.Config{
		Client:        leaseClient,
		Namespace:     le.namespace(),
		Identity:      replicaIdentity(),
		Group:         ha.GroupOf(o.Node.NodeName),
		LeaseDuration: le.LeaseDuration,
		RenewDeadline: le.RenewDeadline,
		RetryPeriod:   le.RetryPeriod,
	})
}

// managedServe starts serving managed Node n, its kubelet API on port;
// once started, n is served until ctx ends or serving fails, and stopped
// is then called, once everything serving held is released, with why.
// stopped is not called when managedServe returns an error.
type managedServe func(ctx context.Context, n managedRef, port int32, stopped func(error)) error

// managedRef names the Node a managed node serves: a Node by that name
// with another UID is another Node. Serving keeps this, not the cache's
// Node of the moment, which the cache replaces at each status write.
type managedRef struct {
	Name string
	UID  types.UID
}

// holdManaged makes serve a replica's: the node joins the shared set, is
// served only while this replica holds it (ha.Hold), and leaves the set
// when ctx ends. A node that is gone by then loses its holder lease too,
// so that Nodes coming and going leave no leases behind.
func holdManaged(members *ha.Members, client kubernetes.Interface, serve managedServe) managedServe {
	return func(ctx context.Context, n managedRef, port int32, stopped func(error)) error {
		members.AddNode(n.Name)
		go func() {
			ha.Hold(ctx, members, n.Name, func(ctx context.Context) error {
				held := make(chan error, 1)
				if err := serve(ctx, n, port, func(err error) { held <- err }); err != nil {
					return err
				}
				return <-held
			})
			cleanup, cancel := context.WithTimeout(context.WithoutCancel(ctx), 10*time.Second)
			defer cancel()
			if _, err := client.CoreV1().Nodes().Get(cleanup, n.Name, metav1.GetOptions{}); apierrors.IsNotFound(err) {
				members.DeleteHolderLease(cleanup, n.Name)
			}
			members.RemoveNode(n.Name)
			stopped(nil)
		}()
		return nil
	}
}

// managedNodes starts serving each Node the selector matches when the
// process sees it, and stops once it is deleted or no longer matches. One
// owner of the running set: the queue's workers, one per name at a time.
type managedNodes struct {
	selector *nodeSelector
	nodes    corev1listers.NodeLister
	serve    managedServe
	ports    *portPool
	queue    workqueue.TypedRateLimitingInterface[string]
	// starting holds a slot for each start-up goroutine: a worker waits
	// for one before it spawns the next, so that a thousand Nodes seen at
	// once are not a thousand goroutines waiting on the start gate (their
	// stacks and, once they end, their goroutine records stay with the
	// process).
	starting startGate
	// served, when set, is told how many nodes are served after each
	// change.
	served func(int)

	mu      sync.Mutex
	running map[string]*managedNode
}

// managedNode is one Node being served.
type managedNode struct {
	uid    types.UID
	cancel context.CancelFunc
	// done is closed once serving has returned.
	done chan struct{}
}

func newManagedNodes(selector *nodeSelector, nodes corev1listers.NodeLister, ports *portPool, serve managedServe) *managedNodes {
	return &managedNodes{
		selector: selector,
		nodes:    nodes,
		serve:    serve,
		ports:    ports,
		starting: make(startGate, maxConcurrentStarts),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(workqueue.DefaultTypedControllerRateLimiter[string](),
			workqueue.TypedRateLimitingQueueConfig[string]{Name: "managed-nodes"}),
		running: map[string]*managedNode{},
	}
}

// handler queues the name of every Node the informer adds, changes or
// deletes.
func (m *managedNodes) handler() cache.ResourceEventHandler {
	enqueue := func(obj any) {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		if n, ok := obj.(*corev1.Node); ok {
			m.queue.Add(n.Name)
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, obj any) { enqueue(obj) }, DeleteFunc: enqueue}
}

// run syncs the queued Nodes until ctx ends, then stops every node and
// returns once they have all stopped.
func (m *managedNodes) run(ctx context.Context) {
	var workers sync.WaitGroup
	for range managedSyncWorkers {
		workers.Go(func() {
			for m.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	m.queue.ShutDown()
	workers.Wait()
	m.mu.Lock()
	all := make([]*managedNode, 0, len(m.running))
	for _, r := range m.running {
		r.cancel()
		all = append(all, r)
	}
	m.mu.Unlock()
	for _, r := range all {
		<-r.done
	}
}

func (m *managedNodes) next(ctx context.Context) bool {
	name, shutdown := m.queue.Get()
	if shutdown {
		return false
	}
	defer m.queue.Done(name)
	m.sync(ctx, name)
	return true
}

// sync brings the serving of Node name in line with the cache: stopped if
// the Node is gone, no longer matches, or is another Node by that name (or
// serving ended on its own), started if it matches and is not served.
func (m *managedNodes) sync(ctx context.Context, name string) {
	n, err := m.nodes.Get(name)
	want := err == nil && m.selector.matches(n)
	m.mu.Lock()
	r := m.running[name]
	m.mu.Unlock()
	if r != nil && (!want || r.uid != n.UID || r.ended()) {
		r.cancel()
		<-r.done
		m.mu.Lock()
		delete(m.running, name)
		m.countServed()
		m.mu.Unlock()
		if !want {
			log.G(ctx).WithField("node", name).Info("stopped serving the managed node: it is gone or no longer matches")
		}
		r = nil
	}
	if !want || r != nil || ctx.Err() != nil {
		return
	}
	port, err := m.ports.take()
	if err != nil {
		log.G(ctx).WithField("node", name).WithError(err).Error("cannot serve the managed node")
		m.queue.AddRateLimited(name)
		return
	}
	m.start(ctx, managedRef{Name: n.Name, UID: n.UID}, port)
}

// start serves n on port until it is stopped; serving that ends on its own
// (an error) is retried, with the rate limiter's backoff, by a later sync.
func (m *managedNodes) start(ctx context.Context, n managedRef, port int32) {
	nodeCtx, cancel := context.WithCancel(ctx)
	r := &managedNode{uid: n.UID, cancel: cancel, done: make(chan struct{})}
	m.mu.Lock()
	m.running[n.Name] = r
	m.countServed()
	m.mu.Unlock()
	log.G(ctx).WithFields(log.Fields{"node": n.Name, "port": port}).Info("serving the managed node")
	stopped := func(err error) {
		defer close(r.done)
		if nodeCtx.Err() != nil {
			m.ports.give(port)
			return
		}
		// The port may be what failed (taken by another process): it is
		// kept from the pool, and the retry gets another.
		if errors.Is(err, node.ErrNodeDeleted) {
			m.ports.give(port)
			log.G(ctx).WithField("node", n.Name).Info("the managed node was deleted: it is not registered again")
		} else {
			log.G(ctx).WithField("node", n.Name).WithError(err).Error("serving the managed node stopped; retrying")
		}
		m.queue.AddRateLimited(n.Name)
	}
	// The start-up runs on a goroutine that ends once the node is up, so
	// that a thousand idle nodes do not each hold the stack that started
	// them.
	leave, err := m.starting.enter(nodeCtx)
	if err != nil {
		stopped(err)
		return
	}
	go func() {
		defer leave()
		if err := m.serve(nodeCtx, n, port, stopped); err != nil {
			stopped(err)
		}
	}()
}

// countServed tells served how many nodes are served; m.mu is held.
func (m *managedNodes) countServed() {
	if m.served != nil {
		m.served(len(m.running))
	}
}

// ended reports whether serving has returned.
func (r *managedNode) ended() bool {
	select {
	case <-r.done:
		return true
	default:
		return false
	}
}

// portPool hands out the managed nodes' kubelet API ports: the lowest free
// one from --listen-port up, past the metrics port when that would
// collide; with the shared listener, its port to every node.
type portPool struct {
	mu   sync.Mutex
	base int
	used map[int]bool
	// shared: every node gets base, the shared listener's port.
	shared bool
}

func newPortPool(o *ServerOptions) *portPool {
	p := &portPool{base: int(o.ListenPort), used: map[int]bool{}}
	if host, port, err := net.SplitHostPort(o.MetricsAddr); err == nil && sameInterface(host, o.ListenAddress) {
		if n, err := strconv.Atoi(port); err == nil {
			p.used[n] = true
		}
	}
	return p
}

// take reserves the lowest free port.
func (p *portPool) take() (int32, error) {
	if p.shared {
		return int32(p.base), nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	for port := p.base; port <= 65535; port++ {
		if !p.used[port] {
			p.used[port] = true
			return int32(port), nil
		}
	}
	return 0, fmt.Errorf("no kubelet API port left from --listen-port %d to 65535", p.base)
}

// give returns port to the pool.
func (p *portPool) give(port int32) {
	if p.shared {
		return
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.used, int(port))
}
