package commands

import (
	"context"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestManagedFlagsBadInput: each bad --manage-* input is one error naming
// the flag.
func TestManagedFlagsBadInput(t *testing.T) {
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--manage-nodes-with-label-selector", "a in (b"}, `--manage-nodes-with-label-selector "a in (b"`},
		{[]string{"--manage-nodes-with-annotation-selector", "kwok.x-k8s.io/node==="}, `--manage-nodes-with-annotation-selector "kwok.x-k8s.io/node==="`},
		{[]string{"--manage-all-nodes", "--manage-single-node", "n1"}, "--manage-all-nodes and --manage-single-node are exclusive"},
		{[]string{"--manage-single-node", "n1", "--manage-nodes-with-label-selector", "a=b"}, "--manage-single-node and --manage-nodes-with-label-selector are exclusive"},
		{[]string{"--manage-all-nodes", "--manage-nodes-with-annotation-selector", "a=b"}, "--manage-all-nodes and --manage-nodes-with-annotation-selector are exclusive"},
		{[]string{"--manage-single-node", "Not_A_Node"}, `--manage-single-node "Not_A_Node" is not a valid node name`},
		{[]string{"--manage-all-nodes", "--node-count", "3"}, "--node-count 3 registers nodes, which the --manage-* flags do not"},
	}
	for _, c := range cases {
		code, _, errOut := run(t, append([]string{"--provider", "fake"}, c.args...)...)
		if code == 0 || !strings.Contains(errOut, c.want) || strings.Count(strings.TrimSpace(errOut), "\n") > 0 {
			t.Errorf("%v: exit %d, stderr %q; want one line with %q", c.args, code, errOut, c.want)
		}
	}
}

func managedSelector(t *testing.T, m ManagedNodeOptions) *nodeSelector {
	t.Helper()
	s, err := m.selector()
	if err != nil {
		t.Fatal(err)
	}
	return s
}

// sharedManagedNodes is managedNodes for every Node in indexer, all on one
// shared listener, served by serve.
func sharedManagedNodes(t *testing.T, indexer cache.Indexer, serve managedServe) *managedNodes {
	t.Helper()
	pool := newPortPool(&ServerOptions{ListenAddress: "127.0.0.1", ListenPort: 10250})
	pool.shared = true
	return newManagedNodes(managedSelector(t, ManagedNodeOptions{All: true}), corev1listers.NewNodeLister(indexer), pool, serve)
}

func TestManagedSelectorMatches(t *testing.T) {
	karpenter := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        "silly-turing-1",
		Labels:      map[string]string{"kwok.x-k8s.io/node": "fake", "karpenter.sh/nodepool": "default"},
		Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"},
	}}
	real := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "worker-1", Labels: map[string]string{"karpenter.sh/nodepool": "default"}}}
	cases := []struct {
		name       string
		opts       ManagedNodeOptions
		karp, real bool
	}{
		{"all", ManagedNodeOptions{All: true}, true, true},
		{"single", ManagedNodeOptions{Single: "worker-1"}, false, true},
		{"label", ManagedNodeOptions{LabelSelector: "kwok.x-k8s.io/node=fake"}, true, false},
		{"label set-based", ManagedNodeOptions{LabelSelector: "karpenter.sh/nodepool in (default)"}, true, true},
		{"annotation", ManagedNodeOptions{AnnotationSelector: "kwok.x-k8s.io/node=fake"}, true, false},
		{"annotation absent", ManagedNodeOptions{AnnotationSelector: "!kwok.x-k8s.io/node"}, false, true},
		{"both must match", ManagedNodeOptions{LabelSelector: "karpenter.sh/nodepool=default", AnnotationSelector: "kwok.x-k8s.io/node=fake"}, true, false},
	}
	for _, c := range cases {
		s := managedSelector(t, c.opts)
		if got := s.matches(karpenter); got != c.karp {
			t.Errorf("%s: Karpenter's node matches %v, want %v", c.name, got, c.karp)
		}
		if got := s.matches(real); got != c.real {
			t.Errorf("%s: the real node matches %v, want %v", c.name, got, c.real)
		}
	}
}

// TestManagedListOptions: the API server filters by name and labels; an
// annotation selector is not a label selector, so the watch is not
// narrowed by it.
func TestManagedListOptions(t *testing.T) {
	var lo metav1.ListOptions
	managedSelector(t, ManagedNodeOptions{Single: "n1"}).listOptions(&lo)
	if lo.FieldSelector != "metadata.name=n1" || lo.LabelSelector != "" {
		t.Errorf("single: %+v", lo)
	}
	lo = metav1.ListOptions{}
	managedSelector(t, ManagedNodeOptions{LabelSelector: "type=kwok", AnnotationSelector: "kwok.x-k8s.io/node=fake"}).listOptions(&lo)
	if lo.LabelSelector != "type=kwok" || lo.FieldSelector != "" {
		t.Errorf("label and annotation: %+v", lo)
	}
	lo = metav1.ListOptions{}
	nodeListOptions(&NodeOptions{NodeCount: 1, Managed: ManagedNodeOptions{AnnotationSelector: "kwok.x-k8s.io/node=fake"}})(&lo)
	if lo.LabelSelector != "" || lo.FieldSelector != "" {
		t.Errorf("annotation only: %+v", lo)
	}
	lo = metav1.ListOptions{}
	nodeListOptions(&NodeOptions{NodeCount: 2})(&lo)
	if lo.LabelSelector != nodeTypeLabel+"="+nodeTypeValue {
		t.Errorf("registered nodes: %+v", lo)
	}
}

// TestManagedSpecLeavesTheCreatorsFields: what the creator set in the
// status (capacity, allocatable, addresses) is not in what the daemon
// applies, so it stays the creator's; what the Node lacks, the provider
// gives.
func TestManagedSpecLeavesTheCreatorsFields(t *testing.T) {
	p, err := mock.New(context.Background(), provider.InitConfig{NodeName: "n1", OperatingSystem: "linux", InternalIP: "10.213.0.2", DaemonPort: 10250})
	if err != nil {
		t.Fatal(err)
	}
	from := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n1", Labels: map[string]string{corev1.LabelArchStable: "arm64", "team": "a"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: "karpenter.sh/unregistered", Effect: corev1.TaintEffectNoExecute}}},
		Status:     corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("4")}},
	}
	from.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "karpenter", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:capacity":{"f:cpu":{}},"f:addresses":{}}}`)}}
	spec := managedSpec(context.Background(), from, p)
	if spec.Status.Capacity != nil || spec.Status.Allocatable != nil {
		t.Errorf("capacity %v allocatable %v: the Node's own must stay", spec.Status.Capacity, spec.Status.Allocatable)
	}
	if len(spec.Labels) != 0 || len(spec.Spec.Taints) != 0 || len(spec.Annotations) != 0 {
		t.Errorf("labels %v taints %v annotations %v: none may be written", spec.Labels, spec.Spec.Taints, spec.Annotations)
	}
	if len(spec.Status.Addresses) == 0 || len(spec.Status.Conditions) == 0 || spec.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("addresses %v conditions %v endpoint %v: the provider's are wanted", spec.Status.Addresses, spec.Status.Conditions, spec.Status.DaemonEndpoints)
	}
	if spec.Status.NodeInfo.Architecture != "arm64" {
		t.Errorf("architecture %q, want the Node label's arm64", spec.Status.NodeInfo.Architecture)
	}
	from.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.2.3"}}
	if spec := managedSpec(context.Background(), from, p); spec.Status.Addresses != nil {
		t.Errorf("addresses %v: the Node's own must stay", spec.Status.Addresses)
	}
	from.Status = corev1.NodeStatus{}
	if spec := managedSpec(context.Background(), from, p); spec.Status.Capacity.Cpu().IsZero() || spec.Status.Allocatable.Cpu().IsZero() {
		t.Errorf("a Node without capacity gets the provider's: %v / %v", spec.Status.Capacity, spec.Status.Allocatable)
	}
	// What the daemon wrote (another replica, before) it writes again:
	// leaving it out of the apply would remove it.
	from.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "10.1.2.4"}}
	from.ManagedFields = []metav1.ManagedFieldsEntry{
		{Manager: "karpenter", FieldsV1: metav1.NewFieldsV1(`{"f:metadata":{"f:labels":{}}}`)},
		{Manager: node.FieldManager, Subresource: "status", FieldsV1: metav1.NewFieldsV1(`{"f:status":{"f:addresses":{}}}`)},
	}
	if spec := managedSpec(context.Background(), from, p); len(spec.Status.Addresses) == 0 {
		t.Error("addresses the daemon set are left out: the next apply would remove them")
	}
}

func TestPortPool(t *testing.T) {
	p := newPortPool(&ServerOptions{ListenAddress: "0.0.0.0", ListenPort: 10250, MetricsAddr: "127.0.0.1:10251"})
	var got []int32
	for range 3 {
		port, err := p.take()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, port)
	}
	if got[0] != 10250 || got[1] != 10252 || got[2] != 10253 {
		t.Errorf("ports %v: want 10250, then past the metrics port 10251", got)
	}
	p.give(10250)
	if port, _ := p.take(); port != 10250 {
		t.Errorf("a freed port is taken again first: got %d", port)
	}
	full := newPortPool(&ServerOptions{ListenAddress: "127.0.0.1", ListenPort: 65535})
	if _, err := full.take(); err != nil {
		t.Fatal(err)
	}
	if _, err := full.take(); err == nil || !strings.Contains(err.Error(), "no kubelet API port left from --listen-port 65535") {
		t.Errorf("exhausted pool: %v", err)
	}
}

// TestManagedNodesFollowTheCache: a Node that matches is served, one that
// does not is not; a Node deleted, or replaced by another of its name,
// stops being served (and the new one is served); its port goes back.
func TestManagedNodesFollowTheCache(t *testing.T) {
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	type call struct {
		uid  types.UID
		port int32
	}
	started, stopped := make(chan call, 10), make(chan call, 10)
	serve := func(ctx context.Context, n managedRef, port int32, done func(error)) error {
		started <- call{n.UID, port}
		context.AfterFunc(ctx, func() {
			stopped <- call{n.UID, port}
			done(nil)
		})
		return nil
	}
	selector := managedSelector(t, ManagedNodeOptions{AnnotationSelector: "kwok.x-k8s.io/node=fake"})
	m := newManagedNodes(selector, corev1listers.NewNodeLister(indexer), newPortPool(&ServerOptions{ListenAddress: "127.0.0.1", ListenPort: 10250}), serve)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	kwokNode := func(name string, uid types.UID) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: uid, Annotations: map[string]string{"kwok.x-k8s.io/node": "fake"}}}
	}
	expect := func(ch chan call, want call, what string) {
		t.Helper()
		select {
		case got := <-ch:
			if got != want {
				t.Errorf("%s: %+v, want %+v", what, got, want)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("%s: nothing", what)
		}
	}
	_ = indexer.Add(kwokNode("a", "a1"))
	_ = indexer.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "real", UID: "r1"}})
	m.sync(ctx, "a")
	m.sync(ctx, "real")
	expect(started, call{"a1", 10250}, "a matching Node")
	m.sync(ctx, "a") // again: still served, once
	select {
	case c := <-started:
		t.Errorf("served twice: %+v", c)
	default:
	}

	_ = indexer.Update(kwokNode("a", "a2")) // deleted and created again
	m.sync(ctx, "a")
	expect(stopped, call{"a1", 10250}, "the old Node")
	expect(started, call{"a2", 10250}, "the new Node, on the port given back")

	_ = indexer.Delete(kwokNode("a", "a2"))
	m.sync(ctx, "a")
	expect(stopped, call{"a2", 10250}, "the deleted Node")
	if len(started) != 0 {
		t.Errorf("%d more started; the Node that does not match must not be", len(started))
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.running) != 0 {
		t.Errorf("still running: %v", m.running)
	}
}

// TestServedNodesHoldNoGoroutine: once a node's serving has started, no
// goroutine of managedNodes waits on it (a thousand idle nodes would each
// keep the stack that started them); its end still reaches the queue.
func TestServedNodesHoldNoGoroutine(t *testing.T) {
	const nodes = 50
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	var up, ended sync.WaitGroup
	up.Add(nodes)
	ended.Add(nodes)
	serve := func(ctx context.Context, n managedRef, port int32, stopped func(error)) error {
		context.AfterFunc(ctx, func() { stopped(nil); ended.Done() })
		up.Done()
		return nil
	}
	m := sharedManagedNodes(t, indexer, serve)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	before := runtime.NumGoroutine()
	for i := range nodes {
		name := fmt.Sprintf("n%d", i)
		_ = indexer.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}})
		m.sync(ctx, name)
	}
	up.Wait()
	deadline := time.Now().Add(5 * time.Second)
	for runtime.NumGoroutine()-before >= nodes/2 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if held := runtime.NumGoroutine() - before; held >= nodes/2 {
		t.Fatalf("%d goroutines more with %d nodes served; want none a node", held, nodes)
	}
	cancel()
	ended.Wait()
}

// TestManagedStartsAreBounded: however many Nodes come at once, no more
// start-ups than maxConcurrentStarts are in flight, each on its goroutine;
// the others wait for a slot, and every Node is served in the end.
func TestManagedStartsAreBounded(t *testing.T) {
	const nodes = 3 * maxConcurrentStarts
	var mu sync.Mutex
	inFlight, most := 0, 0
	release := make(chan struct{})
	var served sync.WaitGroup
	served.Add(nodes)
	serve := func(ctx context.Context, n managedRef, port int32, stopped func(error)) error {
		mu.Lock()
		inFlight++
		most = max(most, inFlight)
		mu.Unlock()
		<-release // the start-up, until the node is up
		mu.Lock()
		inFlight--
		mu.Unlock()
		context.AfterFunc(ctx, func() { stopped(nil) })
		served.Done()
		return nil
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	m := sharedManagedNodes(t, indexer, serve)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	synced := make(chan struct{})
	go func() {
		defer close(synced)
		for i := range nodes {
			name := fmt.Sprintf("n%d", i)
			_ = indexer.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, UID: types.UID(name)}})
			m.sync(ctx, name)
		}
	}()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		n := inFlight
		mu.Unlock()
		if n >= maxConcurrentStarts || time.Now().After(deadline) {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(50 * time.Millisecond) // room for a start past the bound
	close(release)
	served.Wait()
	<-synced
	if most != maxConcurrentStarts {
		t.Errorf("%d start-ups in flight at once, want %d", most, maxConcurrentStarts)
	}
}

// TestServedNodeKeepsNoNodeObject: what lives as long as a served node
// (the callback its end reports to) keeps the node's name, not the
// cache's Node it was started from, which the cache replaces at each
// status write.
func TestServedNodeKeepsNoNodeObject(t *testing.T) {
	var held []func(error)
	var mu sync.Mutex
	up := make(chan struct{}, 1)
	serve := func(ctx context.Context, n managedRef, port int32, stopped func(error)) error {
		mu.Lock()
		held = append(held, stopped)
		mu.Unlock()
		up <- struct{}{}
		return nil
	}
	indexer := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	m := sharedManagedNodes(t, indexer, serve)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	collected := make(chan struct{})
	func() {
		n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0", UID: "u0"}}
		runtime.SetFinalizer(n, func(*corev1.Node) { close(collected) })
		_ = indexer.Add(n)
		m.sync(ctx, n.Name)
		// The cache replaces it, as at the node's next status write.
		_ = indexer.Update(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n0", UID: "u0"}})
	}()
	<-up
	deadline := time.After(10 * time.Second)
	for {
		runtime.GC()
		select {
		case <-collected:
			mu.Lock()
			defer mu.Unlock()
			if len(held) != 1 {
				t.Fatalf("%d callbacks held, want 1", len(held))
			}
			return
		case <-deadline:
			t.Fatal("the Node a served node started from is still reachable 10s later")
		case <-time.After(10 * time.Millisecond):
		}
	}
}
