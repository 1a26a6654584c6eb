//go:build e2e

package e2e_test

import (
	"cmp"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"
)

// processKey names one process: a pid with its start time, as a pid may be
// reused within a pass.
type processKey struct {
	pid   int
	start int64 // clock ticks after boot
}

// procCPU is one process's CPU time so far: its own, and that of the
// children it has reaped (which is how the jobs' short-lived processes,
// the sandbox's and Slurm's, show: in slurmd's and slurmstepd's).
type procCPU struct {
	command        string
	self, children time.Duration
}

// cpuSnapshot is every process's CPU time at one moment.
type cpuSnapshot map[processKey]procCPU

// takeCPUSnapshot reads /proc/*/stat. A process that exits while it is
// read is left out.
func takeCPUSnapshot() cpuSnapshot {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	snap := make(cpuSnapshot, len(stats))
	for _, path := range stats {
		data, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		key, cpu, ok := parseProcStat(string(data))
		if ok {
			snap[key] = cpu
		}
	}
	return snap
}

// parseProcStat reads proc(5)'s stat line: the command is in parentheses
// (and may hold them), utime, stime, cutime and cstime are the 14th to
// 17th fields and starttime the 22nd, counted from the pid.
func parseProcStat(line string) (processKey, procCPU, bool) {
	open, end := strings.IndexByte(line, '('), strings.LastIndexByte(line, ')')
	if open < 0 || end < open {
		return processKey{}, procCPU{}, false
	}
	pid, err := strconv.Atoi(strings.TrimSpace(line[:open]))
	f := strings.Fields(line[end+1:])
	if err != nil || len(f) < 20 {
		return processKey{}, procCPU{}, false
	}
	var v [5]int64
	for i, field := range []int{11, 12, 13, 14, 19} {
		if v[i], err = strconv.ParseInt(f[field], 10, 64); err != nil {
			return processKey{}, procCPU{}, false
		}
	}
	tick := func(n int64) time.Duration { return time.Duration(n) * 10 * time.Millisecond }
	return processKey{pid, v[4]}, procCPU{command: line[open+1 : end], self: tick(v[0] + v[1]), children: tick(v[2] + v[3])}, true
}

// commandCPU is what the processes of one command spent over a pass.
type commandCPU struct {
	command        string
	self, children time.Duration
}

// cpuSince is what each command's processes spent from before to s, most
// first: processes alive at both moments count their difference, those
// started since count all of theirs. Processes that started and exited in
// between count in the parent that reaped them.
func (s cpuSnapshot) cpuSince(before cpuSnapshot) []commandCPU {
	by := map[string]*commandCPU{}
	for key, now := range s {
		c := by[now.command]
		if c == nil {
			c = &commandCPU{command: now.command}
			by[now.command] = c
		}
		then := before[key]
		c.self += now.self - then.self
		c.children += now.children - then.children
	}
	out := make([]commandCPU, 0, len(by))
	for _, c := range by {
		if c.self+c.children > 0 {
			out = append(out, *c)
		}
	}
	slices.SortFunc(out, func(a, b commandCPU) int {
		return cmp.Or(cmp.Compare(b.self+b.children, a.self+a.children), strings.Compare(a.command, b.command))
	})
	return out
}

// formatCPU lists the first n commands, "name self+children" in seconds.
func formatCPU(cpu []commandCPU, n int) string {
	parts := make([]string, 0, n)
	for _, c := range cpu[:min(n, len(cpu))] {
		parts = append(parts, fmt.Sprintf("%s %.1f+%.1f", c.command, c.self.Seconds(), c.children.Seconds()))
	}
	return strings.Join(parts, ", ")
}

// spread is when the items of a pass got somewhere, after its start: the
// first, the median, the 90th percentile and the last.
func spread(start time.Time, at []time.Time) string {
	if len(at) == 0 {
		return "none"
	}
	d := make([]time.Duration, len(at))
	for i, t := range at {
		d[i] = t.Sub(start)
	}
	slices.Sort(d)
	q := func(f float64) float64 { return d[int(f*float64(len(d)-1))].Seconds() }
	return fmt.Sprintf("%d: first %.2fs, median %.2fs, p90 %.2fs, last %.2fs", len(d), q(0), q(0.5), q(0.9), q(1))
}

// sampleModTimes looks for files that match pattern every 50ms, as they
// may be removed soon after they are written, until stop is called; stop
// returns the modification time of each file seen.
func sampleModTimes(pattern string) (stop func() []time.Time) {
	seen := map[string]time.Time{}
	done, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			paths, _ := filepath.Glob(pattern)
			for _, p := range paths {
				if _, ok := seen[p]; !ok {
					if st, err := os.Stat(p); err == nil {
						seen[p] = st.ModTime()
					}
				}
			}
			select {
			case <-done:
				return
			case <-t.C:
			}
		}
	}()
	return func() []time.Time {
		close(done)
		<-stopped
		return slices.Collect(maps.Values(seen))
	}
}

// modTimes is the modification time of each file that matches pattern.
func modTimes(pattern string) []time.Time {
	paths, _ := filepath.Glob(pattern)
	var at []time.Time
	for _, p := range paths {
		if st, err := os.Stat(p); err == nil {
			at = append(at, st.ModTime())
		}
	}
	return at
}
