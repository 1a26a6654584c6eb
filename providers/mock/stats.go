package mock

import (
	"context"
	"math"
	"math/bits"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
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
	a := newStatsAlloc(p.pods)
	pods := make([]statsv1alpha1.PodStats, 0, len(p.pods))
	for _, ps := range p.pods {
		if !ps.started {
			continue
		}
		pod := statsv1alpha1.PodStats{
			PodRef:     statsv1alpha1.PodReference{Name: ps.pod.name, Namespace: ps.pod.namespace, UID: string(ps.pod.uid)},
			StartTime:  metav1.NewTime(ps.created),
			Containers: a.containerStats(len(ps.containers)),
		}
		var podCPU, podMem uint64
		for _, c := range ps.containers {
			if c.status.State.Running == nil {
				continue
			}
			cpu, mem := p.usageNow(ps, c, now)
			last := len(c.instances) - 1
			pod.Containers = append(pod.Containers, statsv1alpha1.ContainerStats{
				Name:      c.spec.name,
				StartTime: metav1.NewTime(c.instances[last].start),
				CPU:       a.cpu(statsv1alpha1.CPUStats{Time: ts, UsageNanoCores: a.num(cpu), UsageCoreNanoSeconds: a.num(c.instanceCPU(last, now))}),
				Memory:    a.memory(statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: a.num(mem), UsageBytes: a.num(mem), RSSBytes: a.num(mem)}),
			})
			podCPU, podMem = podCPU+cpu, podMem+mem
		}
		podCPUTotal := ps.cpuTime(now)
		pod.CPU = a.cpu(statsv1alpha1.CPUStats{Time: ts, UsageNanoCores: a.num(podCPU), UsageCoreNanoSeconds: a.num(podCPUTotal)})
		pod.Memory = a.memory(statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: a.num(podMem), UsageBytes: a.num(podMem)})
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
			CPU:       a.cpu(statsv1alpha1.CPUStats{Time: ts, UsageNanoCores: a.num(nodeCPU), UsageCoreNanoSeconds: a.num(nodeCPUTotal)}),
			Memory: a.memory(statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: a.num(nodeMem), UsageBytes: a.num(nodeMem),
				AvailableBytes: a.num(available)}),
		},
		Pods: pods,
	}, nil
}

// statsAlloc hands out the figures of one summary from a few slices made
// for it. Each figure is a pointer in the summary's types: made one by one,
// a pod's figures would be a dozen small objects, and a thousand nodes'
// scrapes of a hundred pods each would put over a million of them on the
// heap for the GC to scan, every round of metrics-server's scrapes.
type statsAlloc struct {
	nums       []uint64
	cpus       []statsv1alpha1.CPUStats
	memories   []statsv1alpha1.MemoryStats
	containers []statsv1alpha1.ContainerStats
}

// newStatsAlloc sizes the slices for the pods' figures and the node's. Sizes
// are a hint: a slice that fills up is replaced, and the figures already
// handed out keep the old one.
func newStatsAlloc(pods map[string]*podState) *statsAlloc {
	containers := 0
	for _, ps := range pods {
		containers += len(ps.containers)
	}
	stats := len(pods) + containers + 1
	return &statsAlloc{
		nums:       make([]uint64, 0, 4*len(pods)+5*containers+5),
		cpus:       make([]statsv1alpha1.CPUStats, 0, stats),
		memories:   make([]statsv1alpha1.MemoryStats, 0, stats),
		containers: make([]statsv1alpha1.ContainerStats, 0, containers),
	}
}

func (a *statsAlloc) num(v uint64) *uint64 {
	a.nums = append(a.nums, v)
	return &a.nums[len(a.nums)-1]
}

func (a *statsAlloc) cpu(s statsv1alpha1.CPUStats) *statsv1alpha1.CPUStats {
	a.cpus = append(a.cpus, s)
	return &a.cpus[len(a.cpus)-1]
}

func (a *statsAlloc) memory(s statsv1alpha1.MemoryStats) *statsv1alpha1.MemoryStats {
	a.memories = append(a.memories, s)
	return &a.memories[len(a.memories)-1]
}

// containerStats returns an empty list with room for n containers.
func (a *statsAlloc) containerStats(n int) []statsv1alpha1.ContainerStats {
	if cap(a.containers)-len(a.containers) < n {
		a.containers = make([]statsv1alpha1.ContainerStats, 0, n)
	}
	at := len(a.containers)
	a.containers = a.containers[:at+n]
	return a.containers[at : at : at+n]
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
		total += c.forgottenCPU
		for i := range c.instances {
			total += c.instanceCPU(i, now)
		}
	}
	return total
}
