package kubernetes

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	metricsv1beta1 "k8s.io/metrics/pkg/apis/metrics/v1beta1"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	"k8s.io/utils/ptr"
)

// remoteStats turns B's metrics.k8s.io samples into a kubelet stats summary.
// metrics.k8s.io gives CPU as a rate; the summary (and metrics-server in A,
// which reads /metrics/resource) needs cumulative CPU time as well, so each
// container's time is integrated here from the rates seen, starting at the
// first sample.
type remoteStats struct {
	client metricsclient.Interface

	mu  sync.Mutex
	cpu map[cpuKey]*cpuCounter
}

type cpuKey struct {
	pod       types.UID // B's pod
	container string
}

type cpuCounter struct {
	start, at   time.Time // first and last sample
	nanoCores   uint64    // rate at the last sample
	nanoSeconds uint64    // core-nanoseconds up to the last sample
}

// advance takes the sample of time at, rate nanoCores, and returns the
// counter up to it.
func (c *cpuCounter) advance(at time.Time, nanoCores uint64) uint64 {
	if at.After(c.at) {
		c.nanoSeconds += uint64(float64(c.nanoCores) * at.Sub(c.at).Seconds())
		c.at, c.nanoCores = at, nanoCores
	}
	return c.nanoSeconds
}

// GetStatsSummary builds the summary from B's metrics.k8s.io (metrics-server
// or equivalent): per-container CPU and memory of this node's pods and their
// sums. Where B does not serve that API the error says so.
func (p *Provider) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	list, err := p.stats.client.MetricsV1beta1().PodMetricses(p.cfg.Namespace).List(ctx, metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{LabelNode: p.nodeName}).String(),
	})
	if apierrors.IsNotFound(err) {
		return nil, fmt.Errorf("stats are not available: the remote cluster does not serve metrics.k8s.io (install metrics-server there)")
	}
	if err != nil {
		return nil, fmt.Errorf("stats from the remote cluster's metrics.k8s.io: %w", err)
	}
	now := metav1.NewTime(time.Now())
	var nodeCPU, nodeCPUTime, nodeMem uint64
	pods := make([]statsv1alpha1.PodStats, 0, len(list.Items))
	p.stats.mu.Lock()
	defer p.stats.mu.Unlock()
	seen := map[cpuKey]bool{}
	for i := range list.Items {
		m := &list.Items[i]
		obj, ok, _ := p.pods.GetIndexer().GetByKey(m.Namespace + "/" + m.Name)
		if !ok {
			continue // gone from B since the sample
		}
		remote := obj.(*corev1.Pod)
		ns, name, uid, ok := p.trust.sourceOf(remote)
		if !ok {
			continue // not made by this node
		}
		pod := p.stats.podStats(remote, statsv1alpha1.PodReference{Namespace: ns, Name: name, UID: string(uid)}, m, seen)
		pods = append(pods, pod)
		nodeCPU += *pod.CPU.UsageNanoCores
		nodeCPUTime += *pod.CPU.UsageCoreNanoSeconds
		nodeMem += *pod.Memory.WorkingSetBytes
	}
	for k := range p.stats.cpu {
		if !seen[k] {
			delete(p.stats.cpu, k)
		}
	}
	return &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{
			NodeName:  p.nodeName,
			StartTime: metav1.NewTime(p.startedAt),
			CPU:       &statsv1alpha1.CPUStats{Time: now, UsageNanoCores: ptr.To(nodeCPU), UsageCoreNanoSeconds: ptr.To(nodeCPUTime)},
			Memory:    &statsv1alpha1.MemoryStats{Time: now, WorkingSetBytes: ptr.To(nodeMem)},
		},
		Pods: pods,
	}, nil
}

// podStats is the entry of B's pod remote, named ref in A; s.mu must be
// held.
func (s *remoteStats) podStats(remote *corev1.Pod, ref statsv1alpha1.PodReference, m *metricsv1beta1.PodMetrics, seen map[cpuKey]bool) statsv1alpha1.PodStats {
	pod := statsv1alpha1.PodStats{PodRef: ref}
	if remote.Status.StartTime != nil {
		pod.StartTime = *remote.Status.StartTime
	}
	var podCPU, podCPUTime, podMem uint64
	for _, c := range m.Containers {
		cpu := uint64(c.Usage.Cpu().ScaledValue(-9)) // nanocores
		mem := uint64(c.Usage.Memory().Value())
		key := cpuKey{remote.UID, c.Name}
		seen[key] = true
		counter := s.cpu[key]
		if counter == nil {
			counter = &cpuCounter{start: m.Timestamp.Time, at: m.Timestamp.Time, nanoCores: cpu}
			s.cpu[key] = counter
		}
		total := counter.advance(m.Timestamp.Time, cpu)
		pod.Containers = append(pod.Containers, statsv1alpha1.ContainerStats{
			Name:      c.Name,
			StartTime: metav1.NewTime(counter.start),
			CPU:       &statsv1alpha1.CPUStats{Time: m.Timestamp, UsageNanoCores: ptr.To(cpu), UsageCoreNanoSeconds: ptr.To(total)},
			Memory:    &statsv1alpha1.MemoryStats{Time: m.Timestamp, WorkingSetBytes: ptr.To(mem)},
		})
		podCPU, podCPUTime, podMem = podCPU+cpu, podCPUTime+total, podMem+mem
	}
	pod.CPU = &statsv1alpha1.CPUStats{Time: m.Timestamp, UsageNanoCores: ptr.To(podCPU), UsageCoreNanoSeconds: ptr.To(podCPUTime)}
	pod.Memory = &statsv1alpha1.MemoryStats{Time: m.Timestamp, WorkingSetBytes: ptr.To(podMem)}
	return pod
}
