package mock

import (
	"context"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/provider"
)

// processNodeWatch stands for the process's shared watch of its Nodes
// (node.NodeWatch): it hands the subscribers of each name what send gives.
type processNodeWatch struct {
	mu   sync.Mutex
	subs map[string]func(*corev1.Node)
}

func (w *processNodeWatch) Subscribe(name string, observed func(*corev1.Node)) func() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.subs[name] = observed
	return func() {
		w.mu.Lock()
		defer w.mu.Unlock()
		delete(w.subs, name)
	}
}

func (w *processNodeWatch) subscribed(name string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.subs[name] != nil
}

// TestNodeStagesFollowTheProcessWatch: with the process's watch of its
// Nodes, node stages take the Node from its cache at once and its changes
// from the watch, and open no watch of their own.
func TestNodeStagesFollowTheProcessWatch(t *testing.T) {
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{
		Name:        "vk0",
		Labels:      map[string]string{"node-not-ready.stage.kwok.x-k8s.io": "true"},
		Annotations: map[string]string{"node-not-ready.stage.kwok.x-k8s.io/delay": "10ms", "node-not-ready.stage.kwok.x-k8s.io/jitter-delay": "20ms"},
	}}
	nodes := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{})
	if err := nodes.Add(n); err != nil {
		t.Fatal(err)
	}
	watch := &processNodeWatch{subs: map[string]func(*corev1.Node){}}
	kube := fake.NewClientset()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	p, err := New(ctx, provider.InitConfig{
		NodeName: "vk0", InternalIP: "10.213.0.2", StageConfigs: []string{"stages/node-chaos.yaml"}, KubeClient: kube,
		NodeWatch: watch, NodeLister: corev1listers.NewNodeLister(nodes),
	})
	if err != nil {
		t.Fatal(err)
	}
	reported := make(chan *corev1.Node, 100)
	p.(*Provider).NotifyNodeStatus(ctx, func(n *corev1.Node) { reported <- n })
	notReady := func() {
		t.Helper()
		deadline := time.After(10 * time.Second)
		for {
			select {
			case n := <-reported:
				for _, c := range n.Status.Conditions {
					if c.Type == corev1.NodeReady && c.Status == corev1.ConditionFalse {
						return
					}
				}
			case <-deadline:
				t.Fatal("the node did not turn NotReady by its stage within 10s")
			}
		}
	}
	// From the cache: no event has come.
	notReady()
	if !watch.subscribed("vk0") {
		t.Error("node stages did not subscribe to the process's watch")
	}
	for _, a := range kube.Actions() {
		if a.GetResource().Resource == "nodes" && (a.GetVerb() == "list" || a.GetVerb() == "watch") {
			t.Errorf("node stages opened a %s of nodes of their own", a.GetVerb())
		}
	}
	cancel()
	waitUntil(t, "the subscription to end with the provider", func() bool { return !watch.subscribed("vk0") })
}
