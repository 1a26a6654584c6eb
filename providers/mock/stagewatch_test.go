package mock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"k8s.io/client-go/dynamic/dynamicinformer"
	dynamicfake "k8s.io/client-go/dynamic/fake"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/vkubelet/virtual-kubelet/provider"
)

var (
	stagesGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "stages"}
	crusGVR   = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterresourceusages"}
)

// kwokWorld is a fake API server that serves kwok's Stages and
// ClusterResourceUsages (none yet) and knows pods, with one dynamic
// informer factory: a process's.
type kwokWorld struct {
	kube    *fake.Clientset
	dyn     *dynamicfake.FakeDynamicClient
	factory dynamicinformer.DynamicSharedInformerFactory
	pods    corev1listers.PodLister
}

func newKWOKWorld(t *testing.T, pods ...*corev1.Pod) *kwokWorld {
	t.Helper()
	var objects []runtime.Object
	for _, pod := range pods {
		objects = append(objects, pod.DeepCopy())
	}
	kube := fake.NewClientset(objects...)
	kube.Resources = []*metav1.APIResourceList{{GroupVersion: kwokGroupVersion, APIResources: []metav1.APIResource{
		{Name: "stages", Kind: "Stage"}, {Name: "clusterresourceusages", Kind: "ClusterResourceUsage"},
	}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		stagesGVR: "StageList", crusGVR: "ClusterResourceUsageList",
	})
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	inf := informers.NewSharedInformerFactory(kube, 0)
	lister := inf.Core().V1().Pods().Lister()
	inf.Start(ctx.Done())
	inf.WaitForCacheSync(ctx.Done())
	factory := processFactory{dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0), ctx.Done()}
	return &kwokWorld{kube: kube, dyn: dyn, factory: factory, pods: lister}
}

// processFactory starts its informers for the test's life, as the
// daemon's do for the process's (InitConfig.DynamicInformers).
type processFactory struct {
	dynamicinformer.DynamicSharedInformerFactory
	done <-chan struct{}
}

func (f processFactory) Start(<-chan struct{}) { f.DynamicSharedInformerFactory.Start(f.done) }

// provider starts a mock with --watch-stages for node until ctx ends.
func (k *kwokWorld) provider(ctx context.Context, t *testing.T, node string) *Provider {
	t.Helper()
	p, err := New(ctx, provider.InitConfig{
		NodeName: node, InternalIP: "10.213.0.2", KubeClient: k.kube, WatchStages: true,
		DynamicInformers: k.factory,
		ResourceManager:  &provider.ResourceManager{Pods: k.pods},
	})
	if err != nil {
		t.Fatal(err)
	}
	return p.(*Provider)
}

// discoveryCalls counts the fake API server's discovery requests.
func (k *kwokWorld) discoveryCalls() int {
	n := 0
	for _, a := range k.kube.Actions() {
		if a.GetVerb() == "get" && a.GetResource().Resource == "resource" {
			n++
		}
	}
	return n
}

// watchedProvider is a mock with --watch-stages over a fake API server
// that serves kwok's Stages and ClusterResourceUsages (none yet), and
// knows pod.
func watchedProvider(t *testing.T, pod *corev1.Pod) (*Provider, *recorder, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	k := newKWOKWorld(t, pod)
	p := k.provider(ctx, t, "vk0")
	r := &recorder{}
	p.NotifyPods(ctx, r.record)
	return p, r, k.dyn
}

// createObjects creates the objects of a YAML file through dyn.
func createObjects(t *testing.T, dyn *dynamicfake.FakeDynamicClient, gvr schema.GroupVersionResource, path string) {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	dec := utilyaml.NewYAMLOrJSONDecoder(f, 4096)
	for {
		obj := &unstructured.Unstructured{}
		if err := dec.Decode(&obj.Object); err != nil {
			break
		}
		if len(obj.Object) == 0 {
			continue
		}
		if _, err := dyn.Resource(gvr).Create(context.Background(), obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

func (p *Provider) podStages() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.stages.Pods())
}

func waitUntil(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within 10s", what)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// TestWatchedStagesAndUsage: Stages and a ClusterResourceUsage created in
// the cluster after the provider started run its pods, a Stage that does
// not compile is passed over without stopping the others, and the usage
// reaches a running pod without its CPU counter going back.
func TestWatchedStagesAndUsage(t *testing.T) {
	pod := testPod("web", nil, corev1.RestartPolicyAlways)
	p, r, dyn := watchedProvider(t, pod)
	if n := p.podStages(); n != 0 {
		t.Fatalf("%d pod stages before any was created", n)
	}
	createObjects(t, dyn, stagesGVR, "stages/pod-fast.yaml")
	bad := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "kwok.x-k8s.io/v1alpha1", "kind": "Stage", "metadata": map[string]any{"name": "bad", "uid": "u1", "resourceVersion": "1"},
		"spec": map[string]any{"resourceRef": map[string]any{"apiGroup": "v1", "kind": "Pod"}, "selectr": map[string]any{}},
	}}
	if _, err := dyn.Resource(stagesGVR).Create(context.Background(), bad, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fast, err := os.ReadFile("stages/pod-fast.yaml")
	if err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the cluster's stages", func() bool { return p.podStages() > 0 })
	want := countStages(string(fast))
	waitUntil(t, "every good stage and not the bad one", func() bool { return p.podStages() == want })

	ctx := context.Background()
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "Running by the cluster's pod-fast stages", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	before, err := p.GetStatsSummary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	cpuBefore := *podStats(t, before, "web").Containers[0].CPU.UsageCoreNanoSeconds

	createObjects(t, dyn, crusGVR, "testdata/usage-constant.yaml")
	waitUntil(t, "the usage of the running pod", func() bool {
		s, err := p.GetStatsSummary(ctx)
		return err == nil && *podStats(t, s, "web").Containers[0].CPU.UsageNanoCores == 250_000_000
	})
	after, err := p.GetStatsSummary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := *podStats(t, after, "web").Containers[0].CPU.UsageCoreNanoSeconds; got < cpuBefore {
		t.Errorf("the CPU counter went back from %d to %d when the usage changed", cpuBefore, got)
	}

	// The stages deleted, the pods get none.
	list, err := dyn.Resource(stagesGVR).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range list.Items {
		if err := dyn.Resource(stagesGVR).Delete(ctx, s.GetName(), metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "no stages", func() bool { return p.podStages() == 0 })
}

// countStages counts the Stage documents of a stage file.
func countStages(file string) int {
	n := 0
	dec := utilyaml.NewYAMLOrJSONDecoder(strings.NewReader(file), 4096)
	for {
		var doc map[string]any
		if err := dec.Decode(&doc); err != nil {
			return n
		}
		if doc["kind"] == "Stage" {
			n++
		}
	}
}

// TestWatchStagesWithoutTheCRD: without kwok's CRDs the provider does not
// start, and says what to install.
func TestWatchStagesWithoutTheCRD(t *testing.T) {
	dyn := dynamicfake.NewSimpleDynamicClient(runtime.NewScheme())
	_, err := New(context.Background(), provider.InitConfig{
		NodeName: "vk0", KubeClient: fake.NewClientset(), WatchStages: true,
		DynamicInformers: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0),
	})
	if err == nil || !strings.Contains(err.Error(), "--watch-stages") || !strings.Contains(err.Error(), "kwok.x-k8s.io/v1alpha1") || !strings.Contains(err.Error(), "CRDs") {
		t.Fatalf("got %v, want an error naming the flag, the group and the CRDs", err)
	}
}

// TestWatchedStagesSharedByNodes: the nodes of one process share one
// watch: one discovery call and one handler per kind however many nodes
// there are, every node runs by a Stage created later, and the watch
// ends with the last node.
func TestWatchedStagesSharedByNodes(t *testing.T) {
	k := newKWOKWorld(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// Started together, as a process's nodes are.
	nodes := make([]*Provider, 20)
	errs := make([]error, len(nodes))
	var wg sync.WaitGroup
	for i := range nodes {
		wg.Go(func() {
			p, err := New(ctx, provider.InitConfig{
				NodeName: fmt.Sprintf("vk%d", i), KubeClient: k.kube, WatchStages: true, DynamicInformers: k.factory,
				ResourceManager: &provider.ResourceManager{Pods: k.pods},
			})
			if errs[i] = err; err == nil {
				nodes[i] = p.(*Provider)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := k.discoveryCalls(); n != 1 {
		t.Errorf("%d discovery calls for %d nodes, want 1", n, len(nodes))
	}
	createObjects(t, k.dyn, stagesGVR, "stages/pod-fast.yaml")
	fast, err := os.ReadFile("stages/pod-fast.yaml")
	if err != nil {
		t.Fatal(err)
	}
	want := countStages(string(fast))
	for i, p := range nodes {
		waitUntil(t, fmt.Sprintf("node %d's stages", i), func() bool { return p.podStages() == want })
	}

	// Another process (factory) has a watch of its own.
	other := newKWOKWorld(t)
	otherCtx, otherCancel := context.WithCancel(context.Background())
	defer otherCancel()
	if p := other.provider(otherCtx, t, "vk0"); p.podStages() != 0 {
		t.Errorf("a node of another process has %d stages, want those of its own cluster: none", p.podStages())
	}
	if n := other.discoveryCalls(); n != 1 {
		t.Errorf("%d discovery calls for the other process's node, want 1", n)
	}

	cancel()
	waitUntil(t, "the first process's watch to end", func() bool {
		clusterWatches.Lock()
		defer clusterWatches.Unlock()
		_, ok := clusterWatches.m[any(k.factory)]
		return !ok
	})
	// A node started after the others ended asks again.
	late, lateCancel := context.WithCancel(context.Background())
	defer lateCancel()
	if p := k.provider(late, t, "vk9"); p.podStages() != want {
		t.Errorf("a node started later has %d stages, want %d", p.podStages(), want)
	}
	if n := k.discoveryCalls(); n != 2 {
		t.Errorf("%d discovery calls after a new watch, want 2", n)
	}
}
