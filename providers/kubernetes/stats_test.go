package kubernetes

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	clienttesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsfake "k8s.io/metrics/pkg/client/clientset/versioned/fake"
)

// statsProvider is a provider whose B holds one pod of ours, "web" of A's
// namespace "team", and whose metrics API answers with samples.
func statsProvider(t *testing.T, samples func() (*metricsv1beta1.PodMetricsList, error)) *Provider {
	t.Helper()
	client := metricsfake.NewSimpleClientset()
	client.PrependReactor("list", "pods", func(clienttesting.Action) (bool, runtime.Object, error) {
		list, err := samples()
		if list == nil {
			list = &metricsv1beta1.PodMetricsList{} // the fake's List reads it even with an error
		}
		return true, list, err
	})
	p := testProvider(t, Config{})
	p.startedAt = time.Now()
	p.pods = cache.NewSharedIndexInformer(&cache.ListWatch{}, &corev1.Pod{}, 0, cache.Indexers{sourceIndex: p.indexBySource})
	p.stats = &remoteStats{client: client, cpu: map[cpuKey]*cpuCounter{}}
	remote, err := p.remotePod(&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "a-uid"}})
	if err != nil {
		t.Fatal(err)
	}
	remote.UID = "b-uid"
	// A pod of B's users with the same back-links but no signature of
	// this node: not in the summary.
	forged := remote.DeepCopy()
	forged.Name, forged.UID = "forged", "f-uid"
	delete(forged.Annotations, AnnotationSignature)
	for _, pod := range []*corev1.Pod{remote, forged} {
		if err := p.pods.GetIndexer().Add(pod); err != nil {
			t.Fatal(err)
		}
	}
	return p
}

func sample(at time.Time, cpu string) *metricsv1beta1.PodMetricsList {
	return &metricsv1beta1.PodMetricsList{Items: []metricsv1beta1.PodMetrics{{
		ObjectMeta: metav1.ObjectMeta{Namespace: "from-a", Name: "a.vk-b.team.web", Labels: map[string]string{LabelNode: "vk-b"}},
		Timestamp:  metav1.NewTime(at),
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{
			corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse("64Mi"),
		}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Namespace: "from-a", Name: "forged", Labels: map[string]string{LabelNode: "vk-b"}},
		Timestamp:  metav1.NewTime(at),
		Containers: []metricsv1beta1.ContainerMetrics{{Name: "app", Usage: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}}},
	}, {
		ObjectMeta: metav1.ObjectMeta{Namespace: "from-a", Name: "gone", Labels: map[string]string{LabelNode: "vk-b"}},
		Timestamp:  metav1.NewTime(at),
	}}}
}

func TestStatsFromRemoteMetrics(t *testing.T) {
	t0 := time.Now().Add(-time.Minute).Truncate(time.Second)
	next := []*metricsv1beta1.PodMetricsList{sample(t0, "250m"), sample(t0.Add(10*time.Second), "500m"), sample(t0.Add(20*time.Second), "500m")}
	p := statsProvider(t, func() (*metricsv1beta1.PodMetricsList, error) {
		list := next[0]
		next = next[1:]
		return list, nil
	})
	ctx := context.Background()
	var cpuTime []uint64
	for range 3 {
		s, err := p.GetStatsSummary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Pods) != 1 {
			t.Fatalf("pods in the summary: %+v", s.Pods)
		}
		pod := s.Pods[0]
		if pod.PodRef != (statsv1alpha1.PodReference{Namespace: "team", Name: "web", UID: "a-uid"}) || *pod.Memory.WorkingSetBytes != 64<<20 {
			t.Errorf("pod stats: %+v", pod)
		}
		cpuTime = append(cpuTime, *pod.Containers[0].CPU.UsageCoreNanoSeconds)
	}
	// 10s at 250m, then 10s at 500m: the counter integrates the rates.
	if cpuTime[0] != 0 || cpuTime[1] != 2_500_000_000 || cpuTime[2] != 7_500_000_000 {
		t.Errorf("cumulative CPU time = %v, want [0 2.5e9 7.5e9]", cpuTime)
	}
}

func TestStatsWithoutRemoteMetrics(t *testing.T) {
	p := statsProvider(t, func() (*metricsv1beta1.PodMetricsList, error) {
		return nil, apierrors.NewNotFound(schema.GroupResource{Group: "metrics.k8s.io", Resource: "pods"}, "")
	})
	_, err := p.GetStatsSummary(context.Background())
	if err == nil || !strings.Contains(err.Error(), "does not serve metrics.k8s.io") {
		t.Errorf("error = %v", err)
	}
}
