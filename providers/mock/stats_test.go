package mock

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// TestStatsOfManyPods: the figures of a summary come from slices shared by
// all its pods; each pod still gets its own containers and figures, and
// lists a container only while it runs.
func TestStatsOfManyPods(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	// Pod i has i+1 containers; container j uses i*10+j millicores, and the
	// last container of "pod-2" has exited.
	for i := range 3 {
		pod := testPod(fmt.Sprintf("pod-%d", i), map[string]string{}, corev1.RestartPolicyNever)
		pod.Spec.Containers = nil
		for j := range i + 1 {
			name := fmt.Sprintf("c%d", j)
			pod.Spec.Containers = append(pod.Spec.Containers, corev1.Container{Name: name, Image: "busybox"})
			pod.Annotations[AnnotationCPUUsage+"."+name] = fmt.Sprintf("%dm", i*10+j+1)
		}
		if i == 2 {
			pod.Annotations[AnnotationRunFor+".c2"] = "10ms"
		}
		if err := p.CreatePod(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
		if podNamed(t, p, "pod-2").Status.ContainerStatuses[2].State.Terminated != nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("pod-2's container c2 did not exit")
		}
	}
	s, err := p.GetStatsSummary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	seen := map[*uint64]string{}
	for _, ps := range s.Pods {
		var i int
		if _, err := fmt.Sscanf(ps.PodRef.Name, "pod-%d", &i); err != nil {
			t.Fatal(err)
		}
		running := min(i+1, 2)
		if len(ps.Containers) != running {
			t.Errorf("%s: %d containers, want %d", ps.PodRef.Name, len(ps.Containers), running)
			continue
		}
		var sum uint64
		for j, c := range ps.Containers {
			want := uint64(i*10+j+1) * 1e6
			if c.Name != fmt.Sprintf("c%d", j) || *c.CPU.UsageNanoCores != want {
				t.Errorf("%s: container %d is %s at %d nanocores, want c%d at %d", ps.PodRef.Name, j, c.Name, *c.CPU.UsageNanoCores, j, want)
			}
			sum += want
			for _, f := range []*uint64{c.CPU.UsageNanoCores, c.CPU.UsageCoreNanoSeconds, c.Memory.WorkingSetBytes, c.Memory.UsageBytes, c.Memory.RSSBytes} {
				if other, ok := seen[f]; ok {
					t.Errorf("%s/%s: a figure shared with %s", ps.PodRef.Name, c.Name, other)
				}
				seen[f] = ps.PodRef.Name + "/" + c.Name
			}
		}
		if *ps.CPU.UsageNanoCores != sum {
			t.Errorf("%s: %d nanocores, want its containers' %d", ps.PodRef.Name, *ps.CPU.UsageNanoCores, sum)
		}
	}
	if len(s.Pods) != 3 {
		t.Errorf("%d pods, want 3", len(s.Pods))
	}
}

// BenchmarkGetStatsSummary is a node of 100 running pods scraped, as
// metrics-server scrapes every node every 15 s: at 100,000 pods over 1,000
// nodes, what one round of scrapes allocates is on the heap at once.
func BenchmarkGetStatsSummary(b *testing.B) {
	p := providerRunning(b, 100)
	b.ReportAllocs()
	for b.Loop() {
		summary, err := p.GetStatsSummary(context.Background())
		if err != nil || len(summary.Pods) != 100 {
			b.Fatalf("%v, %v", summary, err)
		}
	}
}
