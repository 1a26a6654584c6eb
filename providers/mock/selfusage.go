package mock

import (
	"runtime/metrics"
	"syscall"
	"time"
)

// processUsage samples the CPU and memory this process uses. The mock runs
// its pods in memory, so the daemon is the node's own share beyond its pods'
// scripted figures, as the kubelet and the runtime are on a real node. This
// also keeps a node without busy pods visible to metrics-server, which
// leaves out a node whose figures are zero.
//
// Several mock nodes in one process each report the whole process.
type processUsage struct {
	// at and cpuTime are the previous sample; nanoCores the rate between
	// it and the one before.
	at        time.Time
	cpuTime   time.Duration
	nanoCores uint64
}

// usageSample is one reading of the process's usage.
type usageSample struct {
	// cpuTime is the CPU time the process has used since it started.
	cpuTime time.Duration
	// nanoCores is the rate since the previous reading.
	nanoCores uint64
	// memory is what the Go runtime holds from the system and has not
	// returned: the process's working set, near enough.
	memory uint64
}

func newProcessUsage(now time.Time) *processUsage {
	return &processUsage{at: now, cpuTime: processCPUTime()}
}

// sample reads the usage now. Callers serialise calls (the provider's lock).
func (u *processUsage) sample(now time.Time) usageSample {
	cpu := processCPUTime()
	// Readings closer together than this give a noisy rate: keep the last.
	if d := now.Sub(u.at); d >= 100*time.Millisecond && cpu >= u.cpuTime {
		u.nanoCores = uint64(float64(cpu-u.cpuTime) / d.Seconds())
		u.at, u.cpuTime = now, cpu
	}
	return usageSample{cpuTime: cpu, nanoCores: u.nanoCores, memory: processMemory()}
}

// processCPUTime is the user and system CPU time of the process; zero if the
// system does not say.
func processCPUTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

var memorySamples = []metrics.Sample{
	{Name: "/memory/classes/total:bytes"},
	{Name: "/memory/classes/heap/released:bytes"},
}

// processMemory is the memory the Go runtime has mapped less what it has
// released to the system.
func processMemory() uint64 {
	s := make([]metrics.Sample, len(memorySamples))
	copy(s, memorySamples)
	metrics.Read(s)
	if s[0].Value.Kind() != metrics.KindUint64 || s[1].Value.Kind() != metrics.KindUint64 {
		return 0
	}
	total, released := s[0].Value.Uint64(), s[1].Value.Uint64()
	if released > total {
		return 0
	}
	return total - released
}
