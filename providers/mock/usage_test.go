package mock

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/provider"
)

// usageFile is a Stage-less file of kwok's usage kinds: a pod's own and a
// cluster-wide one whose expression runs past the cost limit. The mock
// loads it before fromAnnotationFile, so the pod spin's CPU is spin's.
const usageFile = `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ResourceUsage
metadata: {name: fixed, namespace: ns}
spec:
  usages:
  - usage:
      cpu: {value: 500m}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {name: spin}
spec:
  selector: {matchNames: [spin]}
  usages:
  - usage:
      cpu: {expression: '[0,1,2,3,4,5,6,7,8,9].map(a, [0,1,2,3,4,5,6,7,8,9].map(b, [0,1,2,3,4,5,6,7,8,9].map(c, [0,1,2,3,4,5,6,7,8,9].map(d, [0,1,2,3,4,5,6,7,8,9].map(e, a))))).size()'}
`

// fromAnnotationFile is kwok's published usage-from-annotation object:
// the usage an annotation gives, else 1m and 1Mi.
const fromAnnotationFile = "internal/usage/testdata/usage-from-annotation.yaml"

func newUsageProvider(t *testing.T) (*Provider, *refRecorder) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "usage.yaml")
	if err := os.WriteFile(path, []byte(usageFile), 0o600); err != nil {
		t.Fatal(err)
	}
	events := &refRecorder{}
	p, err := New(context.Background(), provider.InitConfig{NodeName: "vk0", InternalIP: "10.213.0.2", StageConfigs: []string{path, fromAnnotationFile}, EventRecorder: events})
	if err != nil {
		t.Fatal(err)
	}
	return p.(*Provider), events
}

func podStats(t *testing.T, s *statsv1alpha1.Summary, name string) statsv1alpha1.PodStats {
	t.Helper()
	for _, ps := range s.Pods {
		if ps.PodRef.Name == name {
			return ps
		}
	}
	t.Fatalf("no stats of pod %s", name)
	return statsv1alpha1.PodStats{}
}

// TestUsageObjects: the usage objects give unannotated pods their figures,
// a pod's own object first; the mock's annotations win.
func TestUsageObjects(t *testing.T) {
	p, _ := newUsageProvider(t)
	ctx := context.Background()
	kwokAnnotated := testPod("kwok", map[string]string{"kwok.x-k8s.io/usage-cpu": "250m"}, corev1.RestartPolicyAlways)
	for _, pod := range []*corev1.Pod{
		testPod("plain", nil, corev1.RestartPolicyAlways),
		kwokAnnotated,
		testPod("fixed", nil, corev1.RestartPolicyAlways),
		testPod("mine", map[string]string{AnnotationCPUUsage: "7m"}, corev1.RestartPolicyAlways),
	} {
		if err := p.CreatePod(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	s, err := p.GetStatsSummary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]struct{ cpu, mem uint64 }{
		"plain": {1_000_000, 1 << 20},
		"kwok":  {250_000_000, 1 << 20},
		"fixed": {500_000_000, 1 << 20},
		"mine":  {7_000_000, 0},
	} {
		c := podStats(t, s, name).Containers[0]
		if *c.CPU.UsageNanoCores != want.cpu || *c.Memory.WorkingSetBytes != want.mem {
			t.Errorf("%s: %d nanocores, %d bytes; want %d, %d", name, *c.CPU.UsageNanoCores, *c.Memory.WorkingSetBytes, want.cpu, want.mem)
		}
	}
	// A change of the pod's annotation is its usage at the next read.
	kwokAnnotated.Annotations["kwok.x-k8s.io/usage-cpu"] = "2"
	if err := p.UpdatePod(ctx, kwokAnnotated); err != nil {
		t.Fatal(err)
	}
	s, err = p.GetStatsSummary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if got := *podStats(t, s, "kwok").CPU.UsageNanoCores; got != 2_000_000_000 {
		t.Errorf("after the update: %d nanocores, want 2 cores", got)
	}
}

// TestUsageCumulativeCPU: the CPU counter integrates the figures read:
// between two reads it grows at the rate of the second, and never goes
// down.
func TestUsageCumulativeCPU(t *testing.T) {
	p, _ := newUsageProvider(t)
	ctx := context.Background()
	pod := testPod("kwok", map[string]string{"kwok.x-k8s.io/usage-cpu": "0"}, corev1.RestartPolicyAlways)
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	read := func() (total, rate uint64, at time.Time) {
		s, err := p.GetStatsSummary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		c := podStats(t, s, "kwok").Containers[0]
		return *c.CPU.UsageCoreNanoSeconds, *c.CPU.UsageNanoCores, c.CPU.Time.Time
	}
	set := func(cpu string) {
		pod.Annotations["kwok.x-k8s.io/usage-cpu"] = cpu
		if err := p.UpdatePod(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	t0, _, at0 := read()
	time.Sleep(20 * time.Millisecond)
	set("1")
	t1, rate, at1 := read()
	if rate != 1e9 {
		t.Errorf("rate %d after the change, want one core", rate)
	}
	// One core between the reads: the counter grew by their interval,
	// to within the stats' millisecond timestamps.
	if grew, want := t1-t0, uint64(at1.Sub(at0)); grew+uint64(time.Millisecond) < want || grew > want+uint64(time.Millisecond) {
		t.Errorf("counter grew %d between reads %s apart at one core", grew, at1.Sub(at0))
	}
	set("0")
	time.Sleep(20 * time.Millisecond)
	if t2, _, _ := read(); t2 != t1 {
		t.Errorf("counter %d then %d at zero cores", t1, t2)
	}
}

// TestUsageCostLimit: an expression past the cost limit is cut off, the
// pod gets a Warning naming the object and the limit once, and its stats
// are served with the fallback figure.
func TestUsageCostLimit(t *testing.T) {
	p, events := newUsageProvider(t)
	ctx := context.Background()
	pod := testPod("spin", nil, corev1.RestartPolicyAlways)
	pod.Namespace = "other"
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for range 3 {
		s, err := p.GetStatsSummary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if c := podStats(t, s, "spin").Containers[0]; *c.CPU.UsageNanoCores != 0 {
			t.Errorf("cpu %d, want the fallback 0", *c.CPU.UsageNanoCores)
		}
	}
	events.mu.Lock()
	defer events.mu.Unlock()
	if len(events.events) != 1 {
		t.Fatalf("%d events, want 1: %+v", len(events.events), events.events)
	}
	e := events.events[0]
	if e.eventType != corev1.EventTypeWarning || e.reason != ReasonUsageCostLimit || e.ref.Name != "spin" ||
		!strings.Contains(e.message, "ClusterResourceUsage spin") || !strings.Contains(e.message, "cost limit 100000") {
		t.Errorf("event %+v: want a Warning naming the object and the limit", e)
	}
}

// TestUsageBadFile: a malformed expression is an error at start naming the
// file, the object and the field.
func TestUsageBadFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "bad.yaml")
	data := "apiVersion: kwok.x-k8s.io/v1alpha1\nkind: ClusterResourceUsage\nmetadata: {name: typo}\nspec: {usages: [{usage: {cpu: {expression: 'Quantity(\"1m\"'}}}]}\n"
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := New(context.Background(), provider.InitConfig{NodeName: "vk0", StageConfigs: []string{path}})
	if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), `ClusterResourceUsage "typo"`) ||
		!strings.Contains(err.Error(), "spec.usages[0].usage.cpu.expression") || strings.Contains(err.Error(), "\n") {
		t.Errorf("error %v: want one line naming the file, the object and the field", err)
	}
}

// TestUsageAcrossRestarts: the pod's CPU counter keeps the runs of its
// containers the usage objects drove, as it does the annotations'.
func TestUsageAcrossRestarts(t *testing.T) {
	p, _ := newUsageProvider(t)
	ctx := context.Background()
	pod := testPod("fixed", nil, corev1.RestartPolicyAlways)
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	var last uint64
	for i := range 4 {
		time.Sleep(10 * time.Millisecond)
		s, err := p.GetStatsSummary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		total := *podStats(t, s, "fixed").CPU.UsageCoreNanoSeconds
		if total <= last {
			t.Fatalf("read %d: pod counter %d after %d", i, total, last)
		}
		last = total
		pod = pod.DeepCopy()
		pod.Spec.Containers[0].Image = "busybox:" + string(rune('a'+i)) // a restart
		if err := p.UpdatePod(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
}
