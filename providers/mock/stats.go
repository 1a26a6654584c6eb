package mock

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// GetStatsSummary reports every running container's scripted CPU and memory
// usage (AnnotationCPUUsage, AnnotationMemoryUsage; zero by default), their
// sums per pod and for the node, and the node's memory capacity.
func (p *Provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	now := time.Now()
	ts := metav1.NewTime(now)
	p.mu.Lock()
	defer p.mu.Unlock()

	var nodeCPU, nodeCPUTotal, nodeMem uint64
	pods := make([]statsv1alpha1.PodStats, 0, len(p.pods))
	for _, ps := range p.pods {
		if !ps.started {
			continue
		}
		pod := statsv1alpha1.PodStats{
			PodRef:    statsv1alpha1.PodReference{Name: ps.pod.name, Namespace: ps.pod.namespace, UID: string(ps.pod.uid)},
			StartTime: metav1.NewTime(ps.created),
		}
		var podCPU, podCPUTotal, podMem uint64
		for _, c := range ps.containers {
			if c.status.State.Running == nil {
				continue
			}
			cpu := uint64(c.script.cpu.MilliValue()) * 1_000_000 // nanocores
			start := c.instances[len(c.instances)-1].start
			// Cumulative usage at a constant rate since the instance started.
			total := uint64(float64(cpu) * now.Sub(start).Seconds())
			mem := uint64(c.script.memory.Value())
			pod.Containers = append(pod.Containers, statsv1alpha1.ContainerStats{
				Name:      c.spec.name,
				StartTime: metav1.NewTime(start),
				CPU:       &statsv1alpha1.CPUStats{Time: ts, UsageNanoCores: ptr.To(cpu), UsageCoreNanoSeconds: ptr.To(total)},
				Memory:    &statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: ptr.To(mem), UsageBytes: ptr.To(mem), RSSBytes: ptr.To(mem)},
			})
			podCPU, podCPUTotal, podMem = podCPU+cpu, podCPUTotal+total, podMem+mem
		}
		pod.CPU = &statsv1alpha1.CPUStats{Time: ts, UsageNanoCores: ptr.To(podCPU), UsageCoreNanoSeconds: ptr.To(podCPUTotal)}
		pod.Memory = &statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: ptr.To(podMem), UsageBytes: ptr.To(podMem)}
		pods = append(pods, pod)
		nodeCPU, nodeCPUTotal, nodeMem = nodeCPU+podCPU, nodeCPUTotal+podCPUTotal, nodeMem+podMem
	}

	capacity := p.capacity[corev1.ResourceMemory]
	available := uint64(0)
	if c := uint64(capacity.Value()); c > nodeMem {
		available = c - nodeMem
	}
	return &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{
			NodeName:  p.nodeName,
			StartTime: metav1.NewTime(p.startedAt),
			CPU:       &statsv1alpha1.CPUStats{Time: ts, UsageNanoCores: ptr.To(nodeCPU), UsageCoreNanoSeconds: ptr.To(nodeCPUTotal)},
			Memory: &statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: ptr.To(nodeMem), UsageBytes: ptr.To(nodeMem),
				AvailableBytes: ptr.To(available)},
		},
		Pods: pods,
	}, nil
}
