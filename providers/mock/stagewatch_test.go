package mock

import (
	"context"
	"os"
	"strings"
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

	"github.com/vkubelet/virtual-kubelet/provider"
)

var (
	stagesGVR = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "stages"}
	crusGVR   = schema.GroupVersionResource{Group: "kwok.x-k8s.io", Version: "v1alpha1", Resource: "clusterresourceusages"}
)

// watchedProvider is a mock with --watch-stages over a fake API server
// that serves kwok's Stages and ClusterResourceUsages (none yet), and
// knows pod.
func watchedProvider(t *testing.T, pod *corev1.Pod) (*Provider, *recorder, *dynamicfake.FakeDynamicClient) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	kube := fake.NewClientset(pod.DeepCopy())
	kube.Resources = []*metav1.APIResourceList{{GroupVersion: kwokGroupVersion, APIResources: []metav1.APIResource{
		{Name: "stages", Kind: "Stage"}, {Name: "clusterresourceusages", Kind: "ClusterResourceUsage"},
	}}}
	dyn := dynamicfake.NewSimpleDynamicClientWithCustomListKinds(runtime.NewScheme(), map[schema.GroupVersionResource]string{
		stagesGVR: "StageList", crusGVR: "ClusterResourceUsageList",
	})
	pods := informers.NewSharedInformerFactory(kube, 0)
	lister := pods.Core().V1().Pods().Lister()
	pods.Start(ctx.Done())
	pods.WaitForCacheSync(ctx.Done())
	p, err := New(ctx, provider.InitConfig{
		NodeName: "vk0", InternalIP: "10.213.0.2", KubeClient: kube, WatchStages: true,
		DynamicInformers: dynamicinformer.NewDynamicSharedInformerFactory(dyn, 0),
		ResourceManager:  &provider.ResourceManager{Pods: lister},
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	p.(*Provider).NotifyPods(ctx, r.record)
	return p.(*Provider), r, dyn
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
