package main

import (
	"cmp"
	"context"
	"fmt"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/internal/ha"
)

// replicasResult is the replicas pass (-replicas): daemons started with
// --leader-elect sharing one node set.
type replicasResult struct {
	Replicas   int
	NodesReady time.Duration // from the first start to every node Ready
	// Writes per second to each kind of Lease over the idle window: the
	// holder leases (one per node, renewed by its holder) and the node
	// heartbeat leases in kube-node-lease.
	HolderWrites, HeartbeatWrites float64
	// IdleRSS and PeakRSS are per replica, in start order.
	IdleRSS, PeakRSS []int64
	// Failover is from SIGKILL of the replica holding the most nodes until
	// each of them was held by a live replica; Moved is how many it held.
	Failover time.Duration
	Moved    int
	// NotReady counts the nodes seen Ready other than True at any time
	// after all were first Ready.
	NotReady int
}

// benchReplica is one daemon of the pass and the identity it holds leases as.
type benchReplica struct {
	*benchDaemon
	identity string
}

var replicaIdentity = regexp.MustCompile(`replica=(\S+)`)

// replicasPass runs c.replicas daemons with --leader-elect over the nodes,
// each on its own loopback address (one port per node, the same on each):
// how long the nodes take to be Ready, what the idle leases cost the API
// server, each replica's memory, the pods through them, and a failover.
func replicasPass(ctx context.Context, c config, cl *cluster, n, nodes int) (*replicasResult, *phaseResult, error) {
	prefix := fmt.Sprintf("bench-ha-%d", n)
	names := nodeNames(prefix, nodes)
	leaseNS, err := namespace(ctx, cl.client, prefix+"-leases")
	if err != nil {
		return nil, nil, err
	}
	defer cleanup(cl.client, leaseNS, nil)
	w := watchLeases(ctx, cl.client, leaseNS, prefix)
	r := &replicasResult{Replicas: c.replicas}
	started := time.Now()
	var replicas []*benchReplica
	defer func() {
		for _, rep := range replicas {
			rep.stop()
		}
	}()
	for i := range c.replicas {
		d, err := startDaemon(ctx, c, daemonSpec{
			name: prefix, nodes: nodes, kubeconfig: cl.info.Kubeconfig, provider: []string{"--provider", "mock"}, measured: true,
			ip:       fmt.Sprintf("127.0.0.%d", 2+i),
			extra:    []string{"--leader-elect", "--leader-elect-resource-namespace", leaseNS},
			logLevel: "info", // the replica's identity is in its log
		})
		if err != nil {
			return nil, nil, err
		}
		replicas = append(replicas, &benchReplica{benchDaemon: d})
	}
	for _, name := range names {
		if err := waitNodeReady(ctx, cl.client, name); err != nil {
			return nil, nil, fmt.Errorf("replicas: node %s: %w", name, err)
		}
	}
	r.NodesReady = time.Since(started)
	w.nodesUp.Store(true)
	for _, rep := range replicas {
		if rep.identity, err = identityOf(rep.logPath); err != nil {
			return nil, nil, err
		}
	}
	logf("N=%d replicas: %d nodes Ready in %s over %d replicas", n, nodes, r.NodesReady.Round(time.Millisecond), c.replicas)

	window := cmp.Or(c.steady, 30*time.Second)
	holder, heartbeat := w.holderWrites.Load(), w.heartbeatWrites.Load()
	time.Sleep(window)
	r.HolderWrites = float64(w.holderWrites.Load()-holder) / window.Seconds()
	r.HeartbeatWrites = float64(w.heartbeatWrites.Load()-heartbeat) / window.Seconds()
	for _, rep := range replicas {
		r.IdleRSS = append(r.IdleRSS, rep.usage().RSS)
	}

	ns, err := namespace(ctx, cl.client, prefix)
	if err != nil {
		return nil, nil, err
	}
	defer cleanup(cl.client, ns, names)
	pass, err := runPass(ctx, cl.client, ns, names, n, c.workers, newTracker(n), passHooks{phase: apiServerProfiler(c, cl.client, "replicas", n)})
	if err != nil {
		return nil, nil, fmt.Errorf("replicas: %w", err)
	}
	for _, rep := range replicas {
		r.PeakRSS = append(r.PeakRSS, rep.usage().PeakRSS)
	}

	// SIGKILL the replica holding the most nodes.
	held := w.heldBy()
	victim := replicas[0]
	for _, rep := range replicas {
		if len(held[rep.identity]) > len(held[victim.identity]) {
			victim = rep
		}
	}
	moved := held[victim.identity]
	r.Moved = len(moved)
	victim.Kill()
	killed := time.Now()
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		now := w.heldBy()
		return len(now[victim.identity]) == 0 && len(now[""]) == 0, nil
	})
	if err != nil {
		return nil, nil, fmt.Errorf("replicas: %d nodes of the killed replica not taken over: %w", len(moved), err)
	}
	r.Failover = time.Since(killed)
	r.NotReady = w.notReadyCount()
	logf("N=%d replicas: failover of %d nodes in %s; %d nodes seen not Ready", n, r.Moved, r.Failover.Round(100*time.Millisecond), r.NotReady)
	return r, pass, nil
}

// identityOf reads a replica's identity from its log.
func identityOf(logPath string) (string, error) {
	b, err := os.ReadFile(logPath)
	if err != nil {
		return "", err
	}
	m := replicaIdentity.FindSubmatch(b)
	if m == nil {
		return "", fmt.Errorf("no replica identity in %s", logPath)
	}
	return string(m[1]), nil
}

// leaseWatch counts the writes to the holder leases and the nodes' heartbeat
// leases, follows who holds each node and sees any node go other than Ready.
type leaseWatch struct {
	prefix                        string
	holders                       cache.Indexer
	holderWrites, heartbeatWrites atomic.Int64
	nodesUp                       atomic.Bool
	notReady                      sync.Map // node name -> true
}

func watchLeases(ctx context.Context, client kubernetes.Interface, leaseNS, prefix string) *leaseWatch {
	w := &leaseWatch{prefix: prefix}
	holders := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(leaseNS))
	hinf := holders.Coordination().V1().Leases().Informer()
	w.holders = hinf.GetIndexer()
	_, _ = hinf.AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		if strings.HasPrefix(obj.(*coordinationv1.Lease).Name, ha.HolderLeasePrefix) {
			w.holderWrites.Add(1)
		}
	}})
	heartbeats := informers.NewSharedInformerFactoryWithOptions(client, 0, informers.WithNamespace(corev1.NamespaceNodeLease))
	_, _ = heartbeats.Coordination().V1().Leases().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		if strings.HasPrefix(obj.(*coordinationv1.Lease).Name, prefix) {
			w.heartbeatWrites.Add(1)
		}
	}})
	nodes := informers.NewSharedInformerFactory(client, 0)
	_, _ = nodes.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{UpdateFunc: func(_, obj any) {
		n := obj.(*corev1.Node)
		if !w.nodesUp.Load() || !strings.HasPrefix(n.Name, prefix) {
			return
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady && cond.Status != corev1.ConditionTrue {
				w.notReady.Store(n.Name, true)
			}
		}
	}})
	for _, f := range []informers.SharedInformerFactory{holders, heartbeats, nodes} {
		f.Start(ctx.Done())
		f.WaitForCacheSync(ctx.Done())
	}
	return w
}

// heldBy maps each holder identity to the nodes whose holder lease it
// holds unexpired; "" to the nodes no one holds.
func (w *leaseWatch) heldBy() map[string][]string {
	out := map[string][]string{}
	for _, obj := range w.holders.List() {
		l := obj.(*coordinationv1.Lease)
		node, ok := strings.CutPrefix(l.Name, ha.HolderLeasePrefix)
		if !ok || !strings.HasPrefix(node, w.prefix) {
			continue
		}
		holder := ""
		if l.Spec.HolderIdentity != nil && l.Spec.RenewTime != nil && l.Spec.LeaseDurationSeconds != nil &&
			time.Since(l.Spec.RenewTime.Time) < time.Duration(*l.Spec.LeaseDurationSeconds)*time.Second {
			holder = *l.Spec.HolderIdentity
		}
		out[holder] = append(out[holder], node)
	}
	for _, nodes := range out {
		slices.Sort(nodes)
	}
	return out
}

func (w *leaseWatch) notReadyCount() int {
	count := 0
	w.notReady.Range(func(any, any) bool { count++; return true })
	return count
}
