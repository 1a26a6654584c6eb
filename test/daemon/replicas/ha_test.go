//go:build e2e

package replicas_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/internal/ha"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// Sizes of the HA test: the default suite runs 3 replicas × 6 nodes × 30
// pods and one kill; VK_HA_NODES=30 VK_HA_PODS=300 VK_HA_KILLS=10 is the
// issue's size.
const (
	envHANodes = "VK_HA_NODES"
	envHAPods  = "VK_HA_PODS"
	envHAKills = "VK_HA_KILLS"
)

// haLeaseDuration is --leader-elect-lease-duration's default: the test runs
// the defaults, so the failover it measures is the one users get.
const haLeaseDuration = 15 * time.Second

// replica is one daemon of a group, with what the test knows of it.
type replica struct {
	*daemontest.Daemon
	metrics  string
	identity string
}

// haGroup is replicas of one node set, and the watch on them.
type haGroup struct {
	c          *testcluster.Cluster
	ns, prefix string
	cfg        string
	nodes      []string
	replicas   []*replica
	identities map[string]*replica
	h          *haWatch
}

// newHAGroup starts count replicas of nodeCount nodes whose mock backends
// keep their pods in state directories they share (as a real backend keeps
// running pods whichever replica talks to it), and waits until each node
// is served by the replica it is assigned to.
func newHAGroup(t *testing.T, count, nodeCount int) *haGroup {
	c := testcluster.Shared(t)
	g := &haGroup{c: c, ns: c.Namespace(t), prefix: testcluster.UniqueName("ha"), identities: map[string]*replica{}}
	for i := range nodeCount {
		g.nodes = append(g.nodes, fmt.Sprintf("%s-%d", g.prefix, i))
	}
	t.Cleanup(func() {
		for _, n := range g.nodes {
			_ = c.Client.CoreV1().Nodes().Delete(context.Background(), n, daemontest.DeleteNow)
		}
	})
	g.h = watchHA(t, c, g.ns, g.prefix)
	g.cfg = filepath.Join(t.TempDir(), "mock.json")
	state := filepath.Join(t.TempDir(), "state")
	if err := os.WriteFile(g.cfg, []byte(fmt.Sprintf(`{%q: {"stateDir": %q}}`, g.prefix+"-*", state)), 0o600); err != nil {
		t.Fatal(err)
	}
	for range count {
		g.start(t)
	}
	daemontest.Eventually(t, "every node held by the replica it is assigned to", g.balanced())
	for _, n := range g.nodes {
		daemontest.WaitNodeReady(t, c.Client, n)
	}
	for _, r := range g.replicas {
		t.Logf("replica %s holds %d nodes: %v", r.identity, len(g.held(r)), g.held(r))
	}
	return g
}

// start starts one more replica.
func (g *haGroup) start(t *testing.T) *replica {
	t.Helper()
	host := g.c.AddHost(t, testcluster.UniqueName("h"))
	// Below the kubelet API ports, 10250 on.
	r := &replica{metrics: fmt.Sprintf("%s:%d", host.Addr, 9100)}
	r.Daemon = daemontest.Start(t, g.c, host, "--nodename", g.prefix, "--node-count", strconv.Itoa(len(g.nodes)),
		"--provider-config", g.cfg, "--metrics-addr", r.metrics, "--log-level", "info",
		"--leader-elect", "--leader-elect-resource-namespace", g.ns)
	daemontest.Eventually(t, "the replica's identity in its log", func() (bool, string) {
		m := regexp.MustCompile(`replica=(\S+)`).FindStringSubmatch(r.Output.String())
		if m == nil {
			return false, "no replica= in the log yet"
		}
		r.identity = m[1]
		return true, ""
	})
	g.identities[r.identity] = r
	g.h.setAddr(r.identity, r.Addr)
	g.replicas = append(g.replicas, r)
	return r
}

// pause stops r (SIGSTOP) and returns once every thread of it has
// stopped: the kernel stops one thread first, which then stops the others,
// and under load the rest run on meanwhile. resume (SIGCONT) is also called
// when the test ends, if it was not before.
func (r *replica) pause(t *testing.T) (resume func()) {
	t.Helper()
	pid := r.Cmd.Process.Pid
	if err := r.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	resume = sync.OnceFunc(func() {
		if err := r.Cmd.Process.Signal(syscall.SIGCONT); err != nil && !errors.Is(err, os.ErrProcessDone) {
			t.Error(err)
		}
	})
	t.Cleanup(resume)
	daemontest.Eventually(t, "every thread of the paused replica stopped", func() (bool, string) {
		threads, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
		if err != nil || len(threads) == 0 {
			return false, fmt.Sprintf("no threads of process %d: %v", pid, err)
		}
		for _, path := range threads {
			stat, err := os.ReadFile(path)
			if err != nil {
				return false, err.Error()
			}
			// The state follows the command name's closing parenthesis.
			if i := bytes.LastIndexByte(stat, ')'); i < 0 || i+2 >= len(stat) || stat[i+2] != 'T' {
				return false, fmt.Sprintf("%s: %.80s", path, stat)
			}
		}
		return true, ""
	})
	return resume
}

// live are the identities of the replicas that run and are not paused.
func (g *haGroup) live(paused ...*replica) []string {
	var ids []string
	for _, r := range g.replicas {
		if !r.Exited() && !slices.Contains(paused, r) {
			ids = append(ids, r.identity)
		}
	}
	return ids
}

// balanced: each node held by the replica the live ones (but paused)
// assign it to, and serving it from its address.
func (g *haGroup) balanced(paused ...*replica) func() (bool, string) {
	return func() (bool, string) {
		assigned := ha.Assign(g.nodes, g.live(paused...))
		for _, n := range g.nodes {
			want := g.identities[assigned[n]]
			holder, ip := g.h.holder(n), g.h.nodeIP(n)
			if holder != want.identity || ip != want.Addr {
				return false, fmt.Sprintf("node %s: held by %q at %s, want %s at %s", n, holder, ip, want.identity, want.Addr)
			}
		}
		return true, ""
	}
}

// held are the nodes r holds.
func (g *haGroup) held(r *replica) []string {
	var out []string
	for _, n := range g.nodes {
		if g.h.holder(n) == r.identity {
			out = append(out, n)
		}
	}
	return out
}

// createPods creates count pods spread over the nodes, writing a log line
// every second, waits until they run, and returns how they run.
func (g *haGroup) createPods(t *testing.T, count int) map[string]podRun {
	t.Helper()
	if _, err := daemontest.InParallel(count, func(i int) error {
		p := daemontest.MockPod(fmt.Sprintf("p%d", i), g.nodes[i%len(g.nodes)], corev1.RestartPolicyAlways, map[string]string{mock.AnnotationLogInterval: "1s"})
		_, err := g.c.Client.CoreV1().Pods(g.ns).Create(context.Background(), p, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	return allRunning(t, g.c, g.ns, count)
}

// creates counts the CreatePod calls of each running replica.
func (g *haGroup) creates(t *testing.T) map[*replica]int {
	out := map[*replica]int{}
	for _, r := range g.replicas {
		if !r.Exited() {
			out[r] = daemontest.ProviderCalls(t, r.metrics, "CreatePod")
		}
	}
	return out
}

// checkPodsAsBefore fails the test unless the pods run as they did.
func (g *haGroup) checkPodsAsBefore(t *testing.T, before map[string]podRun) {
	t.Helper()
	after := allRunning(t, g.c, g.ns, len(before))
	for name, was := range before {
		if is := after[name]; is.uid != was.uid || !is.started.Equal(was.started) || is.restarts != was.restarts {
			t.Errorf("pod %s changed: %+v, was %+v", name, is, was)
		}
	}
}

// checkEnd runs the checks of the whole test: the watch's, and no panic.
func (g *haGroup) checkEnd(t *testing.T) {
	t.Helper()
	g.h.check(t)
	for _, r := range g.replicas {
		daemontest.CheckNoPanic(t, r.Daemon)
	}
}

// TestReplicasShareNodes runs 3 replicas with --leader-elect over one node
// set and checks that each node is held by the replica it is assigned to;
// kills the replica holding the most nodes with SIGKILL: its nodes move to
// the others within the node lease's slack, no node ever shows Ready other
// than True, every pod stays Running as it ran and none is created again,
// and kubectl logs and exec reach a moved node. It then pauses a replica
// past the lease duration with SIGSTOP and resumes it: its nodes moved
// meanwhile, and it writes nothing for them until it holds them again.
// Throughout, a node's status is only ever written by the replica holding
// its lease.
func TestReplicasShareNodes(t *testing.T) {
	nodeCount, podCount := daemontest.FloodSize(t, envHANodes, 6), daemontest.FloodSize(t, envHAPods, 30)
	g := newHAGroup(t, 3, nodeCount)
	ctx := context.Background()
	before := g.createPods(t, podCount)
	createdBefore := g.creates(t)
	total := 0
	for _, n := range createdBefore {
		total += n
	}
	if total != podCount {
		t.Fatalf("CreatePod calls over the replicas: %d, want one per pod (%d)", total, podCount)
	}

	// SIGKILL the replica holding the most nodes; with VK_HA_KILLS, again
	// and again, a new replica replacing each killed one as a Deployment's
	// would.
	kills := daemontest.FloodSize(t, envHAKills, 1)
	var moved []string
	var failovers []time.Duration
	for k := range kills {
		if k > 0 {
			g.start(t)
			daemontest.Eventually(t, "the replacement replica gets its share", g.balanced())
		}
		var victim *replica
		for _, r := range g.replicas {
			if !r.Exited() && (victim == nil || len(g.held(r)) > len(g.held(victim))) {
				victim = r
			}
		}
		moved = g.held(victim)
		victim.Kill()
		killed := time.Now()
		daemontest.Eventually(t, "the killed replica's nodes held and served by the others", g.balanced())
		failover := time.Since(killed)
		failovers = append(failovers, failover)
		t.Logf("kill %d: failover of %d nodes after SIGKILL: %s (lease duration %s)", k+1, len(moved), failover.Round(100*time.Millisecond), haLeaseDuration)
		if slack := 30 * time.Second; failover > slack {
			t.Errorf("failover took %s, past the %s the node leases allow", failover, slack)
		}
	}
	if kills > 1 {
		slices.Sort(failovers)
		t.Logf("failover over %d kills: min %s, median %s, max %s", kills, failovers[0].Round(100*time.Millisecond),
			failovers[kills/2].Round(100*time.Millisecond), failovers[kills-1].Round(100*time.Millisecond))
	}
	g.checkPodsAsBefore(t, before)
	for r, n := range g.creates(t) {
		if n != createdBefore[r] {
			t.Errorf("replica %s made %d CreatePod calls after the failover, want none", r.identity, n-createdBefore[r])
		}
	}
	// kubectl logs and exec reach a pod of a moved node, at its new holder.
	target := ""
	for i := range podCount {
		if g.nodes[i%nodeCount] == moved[0] {
			target = fmt.Sprintf("p%d", i)
			break
		}
	}
	if out, err := g.c.Kubectl(ctx, "-n", g.ns, "logs", target, "--tail=1"); err != nil || !strings.Contains(out, g.ns+"/"+target+"/main line") {
		t.Errorf("kubectl logs %s on moved node %s: %v %q", target, moved[0], err, out)
	}
	if out, err := g.c.Kubectl(ctx, "-n", g.ns, "exec", target, "--", "echo", "moved"); err != nil || out != "moved\n" {
		t.Errorf("kubectl exec %s on moved node %s: %v %q", target, moved[0], err, out)
	}

	// SIGSTOP the survivor holding more nodes past the lease duration,
	// then SIGCONT: its nodes move meanwhile; once resumed it writes
	// nothing for them (checkEnd) and takes back what is handed to it.
	var p *replica
	for _, r := range g.replicas {
		if !r.Exited() && (p == nil || len(g.held(r)) > len(g.held(p))) {
			p = r
		}
	}
	pausedNodes := g.held(p)
	resume := p.pause(t)
	stopped := time.Now()
	daemontest.Eventually(t, "the paused replica's nodes held by the other one", g.balanced(p))
	t.Logf("failover of %d nodes after SIGSTOP: %s", len(pausedNodes), time.Since(stopped).Round(100*time.Millisecond))
	resume()
	resumed := time.Now()
	daemontest.Eventually(t, "the resumed replica rejoins and gets its nodes back", g.balanced())
	t.Logf("the resumed replica serves its nodes again after %s", time.Since(resumed).Round(100*time.Millisecond))
	if !strings.Contains(p.Output.String(), "every provider call and status write for the node") {
		t.Errorf("the paused replica did not log that it stopped serving its nodes on resuming")
	}
	g.checkPodsAsBefore(t, before)
	g.checkEnd(t)
}

// TestReplicasRollingRestart replaces the 3 replicas one by one, as a
// Deployment's rolling update does (SIGTERM, then a new replica): the
// stopping replica hands its nodes over, the new one gets its share, no
// node is ever Ready other than True, and no pod is lost or created again.
func TestReplicasRollingRestart(t *testing.T) {
	g := newHAGroup(t, 3, daemontest.FloodSize(t, envHANodes, 6))
	podCount := daemontest.FloodSize(t, envHAPods, 30)
	before := g.createPods(t, podCount)
	for _, old := range slices.Clone(g.replicas) {
		start := time.Now()
		if code, _ := old.Shutdown(t); code != 0 {
			t.Errorf("replica %s exited with %d on SIGTERM", old.identity, code)
		}
		daemontest.Eventually(t, "the stopped replica's nodes held by the others", g.balanced())
		stopped := time.Since(start)
		g.start(t)
		daemontest.Eventually(t, "the new replica gets its share", g.balanced())
		t.Logf("replica %s replaced: its nodes moved in %s, the new one served its share after %s",
			old.identity, stopped.Round(100*time.Millisecond), time.Since(start).Round(100*time.Millisecond))
	}
	g.checkPodsAsBefore(t, before)
	for r, n := range g.creates(t) {
		if n != 0 {
			t.Errorf("new replica %s made %d CreatePod calls, want none: every pod was adopted", r.identity, n)
		}
	}
	g.checkEnd(t)
}

// podRun is what must not change about a running pod when its node moves.
type podRun struct {
	uid      types.UID
	started  time.Time
	restarts int32
}

// allRunning waits until the namespace's count pods all run, and returns
// how they run.
func allRunning(t *testing.T, c *testcluster.Cluster, ns string, count int) map[string]podRun {
	t.Helper()
	var out map[string]podRun
	daemontest.Eventually(t, fmt.Sprintf("%d pods Running", count), func() (bool, string) {
		list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		out = map[string]podRun{}
		for _, p := range list.Items {
			if run := daemontest.MainContainer(&p).State.Running; daemontest.Running(&p) && run != nil {
				out[p.Name] = podRun{uid: p.UID, started: run.StartedAt.Time, restarts: daemontest.MainContainer(&p).RestartCount}
			}
		}
		return len(out) == count, fmt.Sprintf("%d of %d running", len(out), count)
	})
	return out
}

// haWatch follows the group's Nodes and holder Leases for the whole test.
type haWatch struct {
	mu sync.Mutex
	// holders and ips are the current holder and InternalIP of each node.
	holders, ips map[string]string
	// leases and writes are the holder lease changes and the node status
	// writes (a new Ready heartbeat), in resourceVersion order.
	leases, writes []haEvent
	// notReady are the times a node was seen Ready other than True.
	notReady []string
	// addrs maps replica identities to their addresses.
	addrs map[string]string
}

type haEvent struct {
	node, who string // holder identity or InternalIP
	rv        int64
}

// watchHA starts following the Nodes named prefix-* and the holder leases
// in ns, until the test ends.
func watchHA(t *testing.T, c *testcluster.Cluster, ns, prefix string) *haWatch {
	h := &haWatch{holders: map[string]string{}, ips: map[string]string{}, addrs: map[string]string{}}
	stop := make(chan struct{})
	t.Cleanup(func() { close(stop) })
	nodes := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = "type=virtual-kubelet"
	}))
	_, _ = nodes.Core().V1().Nodes().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.node(prefix, nil, obj.(*corev1.Node)) },
		UpdateFunc: func(old, obj any) { h.node(prefix, old.(*corev1.Node), obj.(*corev1.Node)) },
	})
	leases := informers.NewSharedInformerFactoryWithOptions(c.Client, 0, informers.WithNamespace(ns))
	_, _ = leases.Coordination().V1().Leases().Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { h.lease(obj.(*coordinationv1.Lease)) },
		UpdateFunc: func(_, obj any) { h.lease(obj.(*coordinationv1.Lease)) },
	})
	nodes.Start(stop)
	leases.Start(stop)
	nodes.WaitForCacheSync(stop)
	leases.WaitForCacheSync(stop)
	return h
}

func ready(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func internalIP(n *corev1.Node) string {
	for _, a := range n.Status.Addresses {
		if a.Type == corev1.NodeInternalIP {
			return a.Address
		}
	}
	return ""
}

// resourceVersion as a number: the API server's come from etcd's one
// revision counter, so they order the changes of Nodes and Leases alike
// (clients may not rely on it; a test against one etcd may).
func resourceVersion(o metav1.Object) int64 {
	rv, _ := strconv.ParseInt(o.GetResourceVersion(), 10, 64)
	return rv
}

func (h *haWatch) node(prefix string, old, n *corev1.Node) {
	if !strings.HasPrefix(n.Name, prefix+"-") {
		return
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.ips[n.Name] = internalIP(n)
	r := ready(n)
	if r != nil && r.Status != corev1.ConditionTrue {
		h.notReady = append(h.notReady, fmt.Sprintf("%s %s at rv %s: %s", n.Name, r.Status, n.ResourceVersion, r.Message))
	}
	// A status write of the node's holder stamps a new heartbeat; other
	// writers (the control plane) do not.
	var was *corev1.NodeCondition
	if old != nil {
		was = ready(old)
	}
	if r != nil && (was == nil || !was.LastHeartbeatTime.Equal(&r.LastHeartbeatTime)) {
		h.writes = append(h.writes, haEvent{node: n.Name, who: internalIP(n), rv: resourceVersion(n)})
	}
}

func (h *haWatch) lease(l *coordinationv1.Lease) {
	if !strings.HasPrefix(l.Name, ha.HolderLeasePrefix) {
		return
	}
	node := strings.TrimPrefix(l.Name, ha.HolderLeasePrefix)
	holder := ""
	if l.Spec.HolderIdentity != nil {
		holder = *l.Spec.HolderIdentity
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	h.holders[node] = holder
	h.leases = append(h.leases, haEvent{node: node, who: holder, rv: resourceVersion(l)})
}

func (h *haWatch) setAddr(identity, addr string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.addrs[identity] = addr
}

func (h *haWatch) holder(node string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.holders[node]
}

func (h *haWatch) nodeIP(node string) string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.ips[node]
}

// check fails the test if a node was ever seen Ready other than True, or a
// node's status was written from the address of a replica that did not
// hold its lease at that point (by resourceVersion).
func (h *haWatch) check(t *testing.T) {
	t.Helper()
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, s := range h.notReady {
		t.Errorf("node not Ready: %s", s)
	}
	leases := slices.Clone(h.leases)
	sort.Slice(leases, func(i, j int) bool { return leases[i].rv < leases[j].rv })
	checked := 0
	for _, w := range h.writes {
		holder := ""
		for _, l := range leases {
			if l.rv > w.rv {
				break
			}
			if l.node == w.node {
				holder = l.who
			}
		}
		if holder == "" {
			t.Errorf("node %s status written from %s at rv %d while nobody held its lease", w.node, w.who, w.rv)
			continue
		}
		if h.addrs[holder] != w.who {
			t.Errorf("node %s status written from %s at rv %d while %s (%s) held its lease", w.node, w.who, w.rv, holder, h.addrs[holder])
		}
		checked++
	}
	t.Logf("%d node status writes, each by the holder of the node's lease", checked)
}
