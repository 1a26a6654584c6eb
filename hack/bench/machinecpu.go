package main

import (
	"fmt"
	"os"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"
)

// machineCPU is the CPU time (user and system) every process on the machine
// has used by a moment, summed by process name. The passes share two cores
// with the whole control plane, so what one process saves or spends moves
// what the others get: the difference of two readings says where a phase's
// CPU went.
type machineCPU struct {
	at     time.Time
	byName map[string]time.Duration
}

// readMachineCPU reads /proc. Processes that end between two readings drop
// out of their difference; those the bench measures outlive the pass.
func readMachineCPU() machineCPU {
	m := machineCPU{at: time.Now(), byName: map[string]time.Duration{}}
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return m
	}
	for _, e := range entries {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile("/proc/" + e.Name() + "/stat")
		if err != nil {
			continue // ended since the listing
		}
		if name, cpu, ok := parseStat(string(stat)); ok {
			m.byName[name] += cpu
		}
	}
	return m
}

// parseStat returns a process's name and CPU time from its /proc/PID/stat
// line; the name is in parentheses and may hold spaces.
func parseStat(stat string) (string, time.Duration, bool) {
	open, end := strings.IndexByte(stat, '('), strings.LastIndexByte(stat, ')')
	if open < 0 || end < open || end+2 > len(stat) {
		return "", 0, false
	}
	// After the name: state, ppid, ... utime and stime are the 12th and 13th.
	fields := strings.Fields(stat[end+2:])
	if len(fields) < 13 {
		return "", 0, false
	}
	utime, err1 := strconv.ParseInt(fields[11], 10, 64)
	stime, err2 := strconv.ParseInt(fields[12], 10, 64)
	if err1 != nil || err2 != nil {
		return "", 0, false
	}
	return stat[open+1 : end], time.Duration(utime+stime) * time.Second / 100, true // USER_HZ
}

// cpuUse is where the machine's CPU went over one phase of a pass.
type cpuUse struct {
	Wall   time.Duration
	ByName map[string]time.Duration
}

// since is the CPU each process used from m to now.
func (m machineCPU) since(start machineCPU) cpuUse {
	u := cpuUse{Wall: m.at.Sub(start.at), ByName: map[string]time.Duration{}}
	for name, cpu := range m.byName {
		if d := cpu - start.byName[name]; d > 0 {
			u.ByName[name] = d
		}
	}
	return u
}

// String lists the processes that used at least 1% of a core, most first,
// after the total as a share of the machine.
func (u cpuUse) String() string {
	if u.Wall <= 0 {
		return "not measured"
	}
	var total time.Duration
	names := make([]string, 0, len(u.ByName))
	for name, cpu := range u.ByName {
		total += cpu
		if cpu >= u.Wall/100 {
			names = append(names, name)
		}
	}
	sort.Slice(names, func(i, j int) bool {
		if u.ByName[names[i]] != u.ByName[names[j]] {
			return u.ByName[names[i]] > u.ByName[names[j]]
		}
		return names[i] < names[j]
	})
	parts := make([]string, len(names))
	for i, name := range names {
		parts[i] = fmt.Sprintf("%s %.1fs", name, u.ByName[name].Seconds())
	}
	share := total.Seconds() / u.Wall.Seconds() / float64(runtime.NumCPU()) * 100
	return fmt.Sprintf("%.1fs of CPU in %.1fs (%.0f%% of %d cores): %s", total.Seconds(), u.Wall.Seconds(), share, runtime.NumCPU(), strings.Join(parts, ", "))
}

// sameWork names the processes whose work is the same in every pass: the
// pods have their node set, so the scheduler only follows them, and the
// controller-manager sees the same pods and one node's lease either way.
var sameWork = []string{"kube-scheduler", "kube-controller"} // the kernel keeps 15 bytes of a name

// sameWorkCPU is the CPU u's phase spent on sameWork.
func (u cpuUse) sameWorkCPU() time.Duration {
	var d time.Duration
	for _, name := range sameWork {
		d += u.ByName[name]
	}
	return d
}

// speedAgainst compares the CPU the same work took in u and in floor. The
// passes run minutes apart on a shared machine, whose speed drifts: when
// the same work takes 1.4x the CPU, every process ran slower, and the
// phase's time ratio carries that drift too.
func (u cpuUse) speedAgainst(floor cpuUse) string {
	f, o := floor.sameWorkCPU(), u.sameWorkCPU()
	if f <= 0 || o <= 0 {
		return "not measured"
	}
	return fmt.Sprintf("%.1fs against the floor's %.1fs (%.2fx)", o.Seconds(), f.Seconds(), o.Seconds()/f.Seconds())
}
