package mock

import (
	"context"
	"math"
	"math/bits"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"
)

// GetStatsSummary reports every running container's scripted CPU and memory
// usage (AnnotationCPUUsage, AnnotationMemoryUsage; zero by default), their
// sums per pod, and the node's figures: its pods' plus this process's own, as
// a kubelet's node figures include the kubelet and the runtime.
//
// CPU counters are cumulative as the kubelet's are: a container's since its
// current instance started, a pod's over all its containers' instances, the
// node's over every pod it ran (deleted ones included) and the process, so
// that none ever goes down.
func (p *Provider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	// metrics-server divides the CPU time between two samples by the time
	// between their timestamps, which the text format carries in
	// milliseconds: sampling on whole milliseconds makes the rate it
	// derives the scripted one exactly (kubectl top rounds 250.01m up).
	now := time.Now().Truncate(time.Millisecond)
	ts := metav1.NewTime(now)
	p.mu.Lock()
	defer p.mu.Unlock()

	self := p.self.sample(now)
	nodeCPU, nodeCPUTotal, nodeMem := self.nanoCores, p.retiredCPU+uint64(self.cpuTime), self.memory
	pods := make([]statsv1alpha1.PodStats, 0, len(p.pods))
	for _, ps := range p.pods {
		if !ps.started {
			continue
		}
		pod := statsv1alpha1.PodStats{
			PodRef:    statsv1alpha1.PodReference{Name: ps.pod.name, Namespace: ps.pod.namespace, UID: string(ps.pod.uid)},
			StartTime: metav1.NewTime(ps.created),
		}
		var podCPU, podMem uint64
		for _, c := range ps.containers {
			if c.status.State.Running == nil {
				continue
			}
			cpu := c.script.nanoCores
			start := c.instances[len(c.instances)-1].start
			mem := c.script.memory
			pod.Containers = append(pod.Containers, statsv1alpha1.ContainerStats{
				Name:      c.spec.name,
				StartTime: metav1.NewTime(start),
				CPU:       &statsv1alpha1.CPUStats{Time: ts, UsageNanoCores: ptr.To(cpu), UsageCoreNanoSeconds: ptr.To(cpuTime(cpu, now.Sub(start)))},
				Memory:    &statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: ptr.To(mem), UsageBytes: ptr.To(mem), RSSBytes: ptr.To(mem)},
			})
			podCPU, podMem = podCPU+cpu, podMem+mem
		}
		podCPUTotal := ps.cpuTime(now)
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

// cpuTime is the CPU time, in core-nanoseconds, of running at nanoCores for
// d, rounded down to the nanosecond (floating point would be off by more
// after a day of many cores), or the largest figure if it does not fit.
func cpuTime(nanoCores uint64, d time.Duration) uint64 {
	if d <= 0 {
		return 0
	}
	hi, lo := bits.Mul64(nanoCores, uint64(d))
	if hi >= uint64(time.Second) {
		return math.MaxUint64
	}
	q, _ := bits.Div64(hi, lo, uint64(time.Second))
	return q
}

// cpuTime is the CPU time, in core-nanoseconds, the pod's containers have
// used by now over all their instances.
func (ps *podState) cpuTime(now time.Time) uint64 {
	var total uint64
	for _, c := range ps.containers {
		cpu := c.script.nanoCores
		total += c.forgottenCPU
		for _, in := range c.instances {
			end := in.end
			if end.IsZero() {
				end = now
			}
			total += cpuTime(cpu, end.Sub(in.start))
		}
	}
	return total
}
