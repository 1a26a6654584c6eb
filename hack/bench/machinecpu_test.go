package main

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A process name may hold spaces and parentheses; the CPU fields follow
// the last ')'.
func TestParseStat(t *testing.T) {
	name, cpu, ok := parseStat("4242 (kube (api) server) S 1 4242 4242 0 -1 4194560 10 0 0 0 1234 66 0 0 20 0 9 0 100 0 0")
	if !ok || name != "kube (api) server" || cpu != 13*time.Second {
		t.Errorf("parseStat = %q, %v, %v; want \"kube (api) server\", 13s, true", name, cpu, ok)
	}
	for _, bad := range []string{"", "4242 (short) S 1", "4242 (x) S 1 2 3 4 5 6 7 8 9 10 ten 12"} {
		if _, _, ok := parseStat(bad); ok {
			t.Errorf("parseStat(%q) accepted", bad)
		}
	}
}

// The test process's own work shows under its name, and the listing names
// the busiest first with the machine's share.
func TestMachineCPUSeesWork(t *testing.T) {
	self := filepath.Base(os.Args[0])
	if len(self) > 15 {
		self = self[:15] // the kernel keeps 15 bytes of a name
	}
	start := readMachineCPU()
	// Spin until this process has had 300ms of CPU, not for 300ms of wall
	// time: on a busy machine the latter may be mostly spent waiting.
	for begin, spin := processCPU(t), time.Now(); processCPU(t)-begin < 300*time.Millisecond && time.Since(spin) < time.Minute; {
	}
	use := readMachineCPU().since(start)
	if use.ByName[self] < 100*time.Millisecond {
		t.Errorf("%s used %v of CPU while spinning for 300ms of it; want at least 100ms (%v)", self, use.ByName[self], use.ByName)
	}

	u := cpuUse{Wall: 10 * time.Second, ByName: map[string]time.Duration{"etcd": 2 * time.Second, "kube-apiserver": 12 * time.Second, "idle": 50 * time.Millisecond}}
	got := u.String()
	if !strings.HasPrefix(got, "14.1s of CPU in 10.0s (") || !strings.HasSuffix(got, "cores): kube-apiserver 12.0s, etcd 2.0s") {
		t.Errorf("cpuUse.String() = %q", got)
	}
}

// The same work's CPU is compared with the floor's, and a phase without
// it is said to be unmeasured rather than given a ratio.
func TestSpeedAgainstFloor(t *testing.T) {
	floor := cpuUse{Wall: time.Minute, ByName: map[string]time.Duration{"kube-scheduler": 7 * time.Second, "kube-controller": 9 * time.Second, "kube-apiserver": 70 * time.Second}}
	slower := cpuUse{Wall: time.Minute, ByName: map[string]time.Duration{"kube-scheduler": 10 * time.Second, "kube-controller": 12 * time.Second, "kube-apiserver": 95 * time.Second}}
	if got, want := slower.speedAgainst(floor), "22.0s against the floor's 16.0s (1.38x)"; got != want {
		t.Errorf("speedAgainst = %q, want %q", got, want)
	}
	if got := slower.speedAgainst(cpuUse{}); got != "not measured" {
		t.Errorf("against an unmeasured floor: %q", got)
	}
}

// processCPU is the CPU time this process has used, user and system.
func processCPU(t *testing.T) time.Duration {
	t.Helper()
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
