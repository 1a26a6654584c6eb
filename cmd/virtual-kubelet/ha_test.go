package main_test

import (
	"context"
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
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// Sizes of the HA test: the default suite runs 3 replicas × 6 nodes × 30
// pods; VK_HA_NODES=30 VK_HA_PODS=300 is the size.
const (
	envHANodes = "VK_HA_NODES"
	envHAPods  = "VK_HA_PODS"
)

// haLeaseDuration is --leader-elect-lease-duration's default: the test runs
// the defaults, so the failover it measures is the one users get.
const haLeaseDuration = 15 * time.Second

// replica is one daemon of the group, with what the test knows of it.
type replica struct {
	*daemon
	metrics  string
	identity string
}

// TestReplicasShareNodes runs 3 replicas with --leader-elect over one node
// set whose mock backends keep their pods in shared state directories (as
// a real backend keeps running pods whichever replica talks to it). It
// checks that each node is held by its preferred replica; kills the
// replica holding the most nodes with SIGKILL: its nodes move to the others
// within the node lease's slack, no node ever shows Ready other than True,
// every pod stays Running as it ran and none is created again, and kubectl
// logs and exec reach a moved node. It then pauses a replica past the lease
// duration with SIGSTOP and resumes it: its nodes moved meanwhile, and it
// writes nothing for them until it holds them again. Throughout, a node's
// status is only ever written by the replica holding its lease.
func TestReplicasShareNodes(t *testing.T) {
	nodeCount, podCount := floodSize(t, envHANodes, 6), floodSize(t, envHAPods, 30)
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	prefix := testcluster.UniqueName("ha")
	nodes := make([]string, nodeCount)
	for i := range nodes {
		nodes[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	t.Cleanup(func() {
		for _, n := range nodes {
			_ = c.Client.CoreV1().Nodes().Delete(context.Background(), n, deleteNow)
		}
	})
	h := watchHA(t, c, ns, prefix)

	state := filepath.Join(t.TempDir(), "state")
	cfg := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{%q: {"stateDir": %q}}`, prefix+"-*", state)), 0o600); err != nil {
		t.Fatal(err)
	}
	replicas := make([]*replica, 3)
	for i := range replicas {
		host := c.AddHost(t, testcluster.UniqueName("h"))
		// Below the kubelet API ports, 10250 on.
		r := &replica{metrics: fmt.Sprintf("%s:%d", host.Addr, 9100)}
		r.daemon = startDaemon(t, c, host, "--nodename", prefix, "--node-count", strconv.Itoa(nodeCount),
			"--provider-config", cfg, "--metrics-addr", r.metrics, "--log-level", "info",
			"--leader-elect", "--leader-elect-resource-namespace", ns)
		replicas[i] = r
	}
	identities := map[string]*replica{}
	for _, r := range replicas {
		eventually(t, "the replica's identity in its log", func() (bool, string) {
			m := regexp.MustCompile(`replica=(\S+)`).FindStringSubmatch(r.output.String())
			if m == nil {
				return false, "no replica= in the log yet"
			}
			r.identity = m[1]
			return true, ""
		})
		identities[r.identity] = r
		h.setAddr(r.identity, r.addr)
	}
	live := func(except ...*replica) []string {
		var ids []string
		for _, r := range replicas {
			if !slices.Contains(except, r) {
				ids = append(ids, r.identity)
			}
		}
		return ids
	}
	// Each node held by its preferred replica, serving it from its address.
	balanced := func(ids []string) func() (bool, string) {
		return func() (bool, string) {
			assigned := ha.Assign(nodes, ids)
			for _, n := range nodes {
				want := assigned[n]
				holder, ip := h.holder(n), h.nodeIP(n)
				if holder != want || ip != identities[want].addr {
					return false, fmt.Sprintf("node %s: held by %q at %s, want %s at %s", n, holder, ip, want, identities[want].addr)
				}
			}
			return true, ""
		}
	}
	eventually(t, "every node held by its preferred replica", balanced(live()))
	for _, n := range nodes {
		waitNodeReady(t, c.Client, n)
	}
	held := func(r *replica) []string {
		var out []string
		for _, n := range nodes {
			if h.holder(n) == r.identity {
				out = append(out, n)
			}
		}
		return out
	}
	for _, r := range replicas {
		t.Logf("replica %s holds %d nodes: %v", r.identity, len(held(r)), held(r))
	}

	// Pods spread over the nodes, writing a log line every second.
	pods := make([]string, podCount)
	for i := range pods {
		pods[i] = fmt.Sprintf("p%d", i)
	}
	if _, err := inParallel(podCount, func(i int) error {
		p := mockPod(pods[i], nodes[i%nodeCount], corev1.RestartPolicyAlways, map[string]string{mock.AnnotationLogInterval: "1s"})
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	before := allRunning(t, c, ns, podCount)
	creates := func() map[*replica]int {
		out := map[*replica]int{}
		for _, r := range replicas {
			if !r.Exited() {
				out[r] = providerCalls(t, r.metrics, "CreatePod")
			}
		}
		return out
	}
	createdBefore := creates()
	total := 0
	for _, n := range createdBefore {
		total += n
	}
	if total != podCount {
		t.Fatalf("CreatePod calls over the replicas: %d, want one per pod (%d)", total, podCount)
	}

	// SIGKILL the replica holding the most nodes.
	victim := replicas[0]
	for _, r := range replicas {
		if len(held(r)) > len(held(victim)) {
			victim = r
		}
	}
	moved := held(victim)
	victim.Kill()
	killed := time.Now()
	survivors := live(victim)
	eventually(t, "the killed replica's nodes held and served by their next preferred replicas", balanced(survivors))
	failover := time.Since(killed)
	t.Logf("failover of %d nodes after SIGKILL: %s (lease duration %s)", len(moved), failover.Round(100*time.Millisecond), haLeaseDuration)
	if slack := 30 * time.Second; failover > slack {
		t.Errorf("failover took %s, past the %s the node leases allow", failover, slack)
	}
	after := allRunning(t, c, ns, podCount)
	for name, was := range before {
		is := after[name]
		if is.uid != was.uid || !is.started.Equal(was.started) || is.restarts != was.restarts {
			t.Errorf("pod %s changed across the failover: %+v, was %+v", name, is, was)
		}
	}
	for r, n := range creates() {
		if n != createdBefore[r] {
			t.Errorf("replica %s made %d CreatePod calls after the failover, want none", r.identity, n-createdBefore[r])
		}
	}
	// kubectl logs and exec reach a pod of a moved node, at its new holder.
	target := ""
	for i, p := range pods {
		if nodes[i%nodeCount] == moved[0] {
			target = p
			break
		}
	}
	if out, err := c.Kubectl(ctx, "-n", ns, "logs", target, "--tail=1"); err != nil || !strings.Contains(out, ns+"/"+target+"/main line") {
		t.Errorf("kubectl logs %s on moved node %s: %v %q", target, moved[0], err, out)
	}
	if out, err := c.Kubectl(ctx, "-n", ns, "exec", target, "--", "echo", "moved"); err != nil || out != "moved\n" {
		t.Errorf("kubectl exec %s on moved node %s: %v %q", target, moved[0], err, out)
	}

	// SIGSTOP a survivor holding nodes past the lease duration, then
	// SIGCONT: its nodes move meanwhile; once resumed it writes nothing for
	// them (the invariant below) and takes back only what is handed over.
	paused := survivors[0]
	if len(held(identities[paused])) < len(held(identities[survivors[1]])) {
		paused = survivors[1]
	}
	p := identities[paused]
	pausedNodes := held(p)
	if err := p.Cmd.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	stopped := time.Now()
	other := slices.DeleteFunc(slices.Clone(survivors), func(id string) bool { return id == paused })
	eventually(t, "the paused replica's nodes held by the other one", balanced(other))
	t.Logf("failover of %d nodes after SIGSTOP: %s", len(pausedNodes), time.Since(stopped).Round(100*time.Millisecond))
	if err := p.Cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	resumed := time.Now()
	eventually(t, "the resumed replica rejoins and gets its nodes back", balanced(survivors))
	t.Logf("the resumed replica serves its nodes again after %s", time.Since(resumed).Round(100*time.Millisecond))
	if !strings.Contains(p.output.String(), "every provider call and status write for the node") {
		t.Errorf("the paused replica did not log that it stopped serving its nodes on resuming")
	}

	allRunning(t, c, ns, podCount)
	h.check(t)
	for _, r := range replicas {
		checkNoPanic(t, r.daemon)
	}
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
	eventually(t, fmt.Sprintf("%d pods Running", count), func() (bool, string) {
		list, err := c.Client.CoreV1().Pods(ns).List(context.Background(), metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		out = map[string]podRun{}
		for _, p := range list.Items {
			if run := mainContainer(&p).State.Running; running(&p) && run != nil {
				out[p.Name] = podRun{uid: p.UID, started: run.StartedAt.Time, restarts: mainContainer(&p).RestartCount}
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
