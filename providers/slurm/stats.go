package slurm

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node"
)

var _ node.StatsProvider = (*Provider)(nil)

// jobUsage is what Slurm's accounting sampled of a running job, all its
// steps together: the batch step runs the containers, srun --overlap steps
// the execs, which a kubelet also counts in the container's cgroup.
type jobUsage struct {
	cpu    time.Duration // user + system, since the job started
	memory uint64        // resident bytes, at the last sample
}

// sstat samples the running jobs ids (jobacct_gather must be configured;
// JobAcctGatherFrequency sets how fresh the figures are).
func (s *slurmCLI) sstat(ctx context.Context, ids []string) (map[string]jobUsage, error) {
	out, err := s.run(ctx, nil, "sstat", "--noheader", "--parsable2", "--allsteps",
		"--jobs="+strings.Join(ids, ","), "--format=JobID,TRESUsageInTot")
	if err != nil {
		return nil, err
	}
	return parseSstat(string(out))
}

// parseSstat reads sstat's "JobID|TRESUsageInTot" lines, one per step
// ("12.batch|cpu=00:00:01,mem=1808K,..."), and sums each job's steps.
func parseSstat(out string) (map[string]jobUsage, error) {
	usage := map[string]jobUsage{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if line == "" {
			continue
		}
		step, tres, ok := strings.Cut(line, "|")
		if !ok {
			return nil, fmt.Errorf("sstat: line %q is not JobID|TRESUsageInTot", line)
		}
		id, _, _ := strings.Cut(step, ".")
		u := usage[id]
		for _, kv := range strings.Split(tres, ",") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "cpu":
				d, err := parseSlurmDuration(v)
				if err != nil {
					return nil, fmt.Errorf("sstat: step %s: cpu: %v", step, err)
				}
				u.cpu += d
			case "mem":
				b, err := parseSlurmBytes(v)
				if err != nil {
					return nil, fmt.Errorf("sstat: step %s: mem: %v", step, err)
				}
				u.memory += b
			}
		}
		usage[id] = u
	}
	return usage, nil
}

// parseSlurmDuration reads Slurm's [D-][HH:]MM:SS[.mmm].
func parseSlurmDuration(s string) (time.Duration, error) {
	var days int64
	rest := s
	if d, r, ok := strings.Cut(s, "-"); ok {
		n, err := strconv.ParseInt(d, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not [D-][HH:]MM:SS[.mmm]", s)
		}
		days, rest = n, r
	}
	parts := strings.Split(rest, ":")
	if len(parts) < 2 || len(parts) > 3 {
		return 0, fmt.Errorf("%q is not [D-][HH:]MM:SS[.mmm]", s)
	}
	secs, err := strconv.ParseFloat(parts[len(parts)-1], 64)
	if err != nil || secs < 0 || secs >= 60 {
		return 0, fmt.Errorf("%q is not [D-][HH:]MM:SS[.mmm]", s)
	}
	// Summed in float seconds: a day count past what a Duration holds is
	// an error, not a wrapped negative figure.
	total := float64(days)*86400 + secs
	units := []float64{60, 3600}
	for i, p := range parts[:len(parts)-1] {
		n, err := strconv.ParseInt(p, 10, 64)
		if err != nil || n < 0 {
			return 0, fmt.Errorf("%q is not [D-][HH:]MM:SS[.mmm]", s)
		}
		total += float64(n) * units[len(parts)-2-i]
	}
	if total*float64(time.Second) >= math.MaxInt64 {
		return 0, fmt.Errorf("%q is longer than a duration holds", s)
	}
	return time.Duration(total * float64(time.Second)), nil
}

// parseSlurmBytes reads a size as Slurm prints it: bytes, or a number with
// a binary K, M, G, T or P suffix.
func parseSlurmBytes(s string) (uint64, error) {
	mult := float64(1)
	if n := len(s); n > 0 {
		if i := strings.IndexByte("KMGTP", s[n-1]); i >= 0 {
			mult, s = float64(uint64(1)<<(10*(i+1))), s[:n-1]
		}
	}
	v, err := strconv.ParseFloat(s, 64)
	if err != nil || !(v >= 0) || v*mult >= math.MaxUint64 {
		return 0, fmt.Errorf("%q is not a size", s)
	}
	return uint64(v * mult), nil
}

// GetStatsSummary implements node.StatsProvider from one sstat call for
// the node's running jobs. Slurm accounts for a job, not for each process
// in it, so a pod's figures go to its container when it has one running;
// the containers of a pod with several have none of their own.
func (p *Provider) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	type sampled struct {
		pod        *corev1.Pod
		jobID      string
		start      metav1.Time
		containers []corev1.ContainerStatus
	}
	var running []sampled
	var ids []string
	p.mu.Lock()
	for _, pj := range p.pods {
		if pj.job == nil || pj.job.State != stateRunning || pj.status.StartTime == nil {
			continue
		}
		running = append(running, sampled{pj.pod, pj.jobID, *pj.status.StartTime, pj.status.ContainerStatuses})
		ids = append(ids, pj.jobID)
	}
	p.mu.Unlock()

	usage := map[string]jobUsage{}
	if len(ids) > 0 {
		var err error
		if usage, err = p.cli.sstat(ctx, ids); err != nil {
			return nil, err
		}
	}
	ts := metav1.Now()
	summary := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{NodeName: p.nodeName, StartTime: metav1.NewTime(p.started)}}
	var nodeCPU, nodeMem uint64
	for _, r := range running {
		u, ok := usage[r.jobID]
		if !ok {
			continue // ended since, or not sampled yet
		}
		cpu, mem := uint64(u.cpu.Nanoseconds()), u.memory
		ps := statsv1alpha1.PodStats{
			PodRef:    statsv1alpha1.PodReference{Name: r.pod.Name, Namespace: r.pod.Namespace, UID: string(r.pod.UID)},
			StartTime: r.start,
			CPU:       &statsv1alpha1.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr.To(cpu)},
			Memory:    &statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: ptr.To(mem), RSSBytes: ptr.To(mem)},
		}
		if c := onlyRunning(r.containers); c != nil {
			ps.Containers = []statsv1alpha1.ContainerStats{{
				Name:      c.Name,
				StartTime: c.State.Running.StartedAt,
				CPU:       ps.CPU,
				Memory:    ps.Memory,
			}}
		}
		summary.Pods = append(summary.Pods, ps)
		nodeCPU, nodeMem = nodeCPU+cpu, nodeMem+mem
	}
	summary.Node.CPU = &statsv1alpha1.CPUStats{Time: ts, UsageCoreNanoSeconds: ptr.To(nodeCPU)}
	summary.Node.Memory = &statsv1alpha1.MemoryStats{Time: ts, WorkingSetBytes: ptr.To(nodeMem), RSSBytes: ptr.To(nodeMem)}
	return summary, nil
}

// onlyRunning is the pod's one running container, or nil when it has none
// or several.
func onlyRunning(statuses []corev1.ContainerStatus) *corev1.ContainerStatus {
	var found *corev1.ContainerStatus
	for i := range statuses {
		if statuses[i].State.Running == nil {
			continue
		}
		if found != nil {
			return nil
		}
		found = &statuses[i]
	}
	return found
}
