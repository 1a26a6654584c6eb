package mock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/stage"
	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/usage"
)

// kwok's ResourceUsage and ClusterResourceUsage objects, in the
// --stage-config files, give the CPU and memory of the containers of pods
// that have no mock.vkubelet.io annotation (which win, as over stages).
// An expression is evaluated when the stats are read (/stats/summary,
// /metrics/resource): the figure it gives is the container's usage since
// the previous read (or its start), which the cumulative CPU counter
// integrates, so that metrics-server's rate between two reads is the
// figure of the second, the one the read reports.

// Event reasons of usage expressions that fail on a pod. Either way the
// container's usage falls back to the mock's default, zero (a pod with
// the mock's annotations has no usage objects), until the pod changes.
const (
	// ReasonUsageCostLimit: cel-go cut the expression off at its cost
	// limit or deadline.
	ReasonUsageCostLimit = "UsageCostLimit"
	// ReasonUsageFailed: the expression failed on the pod (a missing
	// field, a figure below zero).
	ReasonUsageFailed = "UsageFailed"
)

// loadUsage compiles the usage objects of the stage files; nil without
// any.
func loadUsage(ctx context.Context, objs []stage.Foreign) (*usage.Set, error) {
	set, err := usage.Compile(objs, usage.Options{})
	if err != nil {
		return nil, err
	}
	for _, name := range set.PassedOver() {
		log.G(ctx).WithField("metric", name).Warn("mock: a kwok Metric object is passed over: the node's stats serve /metrics/resource")
	}
	if set.Empty() {
		return nil, nil
	}
	return set, nil
}

// usageMeter is a container's usage as the usage objects give it, and the
// CPU time it has used at the rates they gave.
type usageMeter struct {
	cpu, mem *usage.Value
	// container is the container as expressions see it; nil when its
	// figures are constants.
	container map[string]any
	// nanoCores and memory are the figures of the last evaluation.
	nanoCores, memory uint64
	// cpuFailed and memFailed are set once an expression failed on the
	// pod: the mock's default, zero, stands in until the pod changes.
	cpuFailed, memFailed bool
	// banked is the CPU time of the current instance before since;
	// previous the whole of the previous instance's.
	banked   uint64
	since    time.Time
	previous uint64
}

// attachUsage gives the containers of the pod the usage the objects give
// them, unless its annotations script it; p.mu must be held.
func (p *Provider) attachUsage(ps *podState, pod *corev1.Pod) {
	if p.usage == nil || scripted(pod) {
		return
	}
	specs := make(map[string]*corev1.Container, len(pod.Spec.InitContainers)+len(pod.Spec.Containers))
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			specs[list[i].Name] = &list[i]
		}
	}
	// Only expressions read the objects: a pod of constants keeps none.
	expressions := false
	for _, c := range ps.allContainers() {
		u := p.usage.For(pod.Namespace, pod.Name, c.spec.name)
		if u.CPU == nil && u.Memory == nil {
			continue
		}
		c.meter = &usageMeter{cpu: u.CPU, mem: u.Memory, nanoCores: c.script.nanoCores, memory: c.script.memory}
		if u.CPU.IsExpression() || u.Memory.IsExpression() {
			c.meter.container = jsonMap(specs[c.spec.name])
			expressions = true
		}
	}
	if expressions {
		ps.usageObj = usagePod(pod)
	}
}

// reattachUsage gives the running containers of the pod the usage the
// objects give them now (--watch-stages: they changed), keeping the CPU
// time each has used so far: a counter never goes back. p.mu must be held.
func (p *Provider) reattachUsage(ps *podState, pod *corev1.Pod, now time.Time) {
	ps.usageObj = nil
	expressions := false
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			c := ps.container(list[i].Name)
			if c == nil || len(c.instances) == 0 || !c.instances[len(c.instances)-1].end.IsZero() {
				continue // not running: its figures are final
			}
			var u usage.Container
			if p.usage != nil {
				u = p.usage.For(pod.Namespace, pod.Name, c.spec.name)
			}
			if c.meter == nil && u.CPU == nil && u.Memory == nil {
				continue
			}
			last := len(c.instances) - 1
			m := &usageMeter{cpu: u.CPU, mem: u.Memory, nanoCores: c.script.nanoCores, memory: c.script.memory, banked: c.instanceCPU(last, now), since: now}
			if last > 0 {
				m.previous = c.instanceCPU(last-1, now)
			}
			if c.meter != nil {
				m.nanoCores = c.meter.nanoCores
			}
			if u.CPU.IsExpression() || u.Memory.IsExpression() {
				m.container = jsonMap(&list[i])
				expressions = true
			}
			c.meter = m
		}
	}
	if expressions {
		ps.usageObj = usagePod(pod)
	}
}

// refreshUsage takes the pod's new object for its expressions, and tries
// again those that failed; p.mu must be held.
func (ps *podState) refreshUsage(pod *corev1.Pod) {
	if ps.usageObj == nil {
		return
	}
	ps.usageObj = usagePod(pod)
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			if c := ps.container(list[i].Name); c != nil && c.meter != nil && c.meter.container != nil {
				c.meter.container = jsonMap(&list[i])
				c.meter.cpuFailed, c.meter.memFailed = false, false
			}
		}
	}
}

// allContainers are the pod's init and app containers.
func (ps *podState) allContainers() []*containerState {
	out := make([]*containerState, 0, len(ps.init)+len(ps.containers))
	return append(append(out, ps.init...), ps.containers...)
}

// usagePod is the pod as expressions see it: its JSON, with the maps
// kwok's expressions look into ("k" in pod.metadata.annotations) present
// even when empty.
func usagePod(pod *corev1.Pod) map[string]any {
	pod = pod.DeepCopy()
	pod.ManagedFields = nil
	m := jsonMap(pod)
	if meta, ok := m["metadata"].(map[string]any); ok {
		for _, k := range []string{"labels", "annotations"} {
			if _, ok := meta[k]; !ok {
				meta[k] = map[string]any{}
			}
		}
	}
	return m
}

// jsonMap is v as encoding/json decodes it into a map; empty for nil.
func jsonMap(v any) map[string]any {
	m := map[string]any{}
	data, err := json.Marshal(v)
	if err == nil {
		_ = json.Unmarshal(data, &m)
	}
	return m
}

// usageNode is the node as expressions see it: what the mock knows of
// its Node.
func usageNode(cfg provider.InitConfig, capacity corev1.ResourceList, started time.Time) map[string]any {
	node := &corev1.Node{}
	node.Name = cfg.NodeName
	node.CreationTimestamp.Time = started
	node.Status.Capacity, node.Status.Allocatable = capacity, capacity
	if cfg.InternalIP != "" {
		node.Status.Addresses = []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: cfg.InternalIP}}
	}
	m := jsonMap(node)
	if meta, ok := m["metadata"].(map[string]any); ok {
		meta["labels"], meta["annotations"] = map[string]any{}, map[string]any{}
	}
	return m
}

// usageNow is the container's CPU and memory now: the usage objects'
// figures if it has any (evaluated now), else its annotations'; p.mu must
// be held and the container running.
func (p *Provider) usageNow(ps *podState, c *containerState, now time.Time) (nanoCores, memory uint64) {
	m := c.meter
	if m == nil {
		return c.script.nanoCores, c.script.memory
	}
	vars := usage.Vars{Pod: ps.usageObj, Node: p.usageNode, Container: m.container}
	cpu := c.script.nanoCores
	if m.cpu != nil && !m.cpuFailed {
		v, err := m.cpu.Eval(context.Background(), vars)
		if err == nil {
			cpu = v
		} else {
			m.cpuFailed = true
			p.usageFailed(ps, c, "cpu", err)
		}
	}
	c.setRate(now, cpu)
	m.memory = c.script.memory
	if m.mem != nil && !m.memFailed {
		v, err := m.mem.Eval(context.Background(), vars)
		if err == nil {
			m.memory = v
		} else {
			m.memFailed = true
			p.usageFailed(ps, c, "memory", err)
		}
	}
	return cpu, m.memory
}

// usageFailed records on the pod that an expression failed on it.
func (p *Provider) usageFailed(ps *podState, c *containerState, resource string, err error) {
	reason := ReasonUsageFailed
	if limit := (*usage.CostLimitError)(nil); errors.As(err, &limit) {
		reason = ReasonUsageCostLimit
	}
	p.events.warnOn(ps.pod.namespace, ps.pod.name, ps.pod.uid, ps.fieldPath(c), reason,
		fmt.Sprintf("%v; container %s's %s usage is the mock's default (zero) until the pod changes", err, c.spec.name, resource))
}

// setRate takes nanoCores, read now, as the rate the running container
// has used CPU at since the previous read (or its start) and uses from
// now until the next.
func (c *containerState) setRate(now time.Time, nanoCores uint64) {
	m := c.meter
	last := len(c.instances) - 1
	if last < 0 {
		return
	}
	from := c.instances[last].start
	if m.since.After(from) {
		from = m.since
	}
	m.banked += cpuTime(nanoCores, now.Sub(from))
	m.since, m.nanoCores = now, nanoCores
}

// instanceCPU is the CPU time, in core-nanoseconds, of the container's
// instance i by now (to its end if it ended).
func (c *containerState) instanceCPU(i int, now time.Time) uint64 {
	in := c.instances[i]
	end := in.end
	if end.IsZero() {
		end = now
	}
	m := c.meter
	switch {
	case m == nil:
		return cpuTime(c.script.nanoCores, end.Sub(in.start))
	case i < len(c.instances)-1:
		return m.previous
	}
	from := in.start
	if m.since.After(from) {
		from = m.since
	}
	return m.banked + cpuTime(m.nanoCores, end.Sub(from))
}

// rollUsage starts a new instance's count: the last one's is the
// previous; called before the new instance is added.
func (c *containerState) rollUsage() {
	m := c.meter
	if m == nil || len(c.instances) == 0 {
		return
	}
	last := len(c.instances) - 1
	m.previous = c.instanceCPU(last, c.instances[last].end)
	m.banked, m.since = 0, time.Time{}
}
