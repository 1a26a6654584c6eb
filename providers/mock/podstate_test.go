package mock

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

// TestBackOffDoubles: the restart back-off doubles from the scripted delay
// up to MaxRestartBackOff, starts over after a long run, and a scripted
// delay longer than the cap is kept as written.
func TestBackOffDoubles(t *testing.T) {
	start := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	c := &containerState{script: script{restartDelay: 10 * time.Millisecond}, instances: []instance{{start: start}}}
	var got []time.Duration
	for range 18 {
		got = append(got, c.backOff(start.Add(time.Second)))
	}
	want := []time.Duration{10 * time.Millisecond, 20 * time.Millisecond, 40 * time.Millisecond, 80 * time.Millisecond}
	for i, w := range want {
		if got[i] != w {
			t.Errorf("back-off %d: %s, want %s", i+1, got[i], w)
		}
	}
	if last := got[len(got)-1]; last != MaxRestartBackOff {
		t.Errorf("back-off after 18 restarts: %s, want the cap %s", last, MaxRestartBackOff)
	}
	if d := c.backOff(start.Add(backOffReset)); d != 10*time.Millisecond {
		t.Errorf("back-off after a run of %s: %s, want it started over at 10ms", backOffReset, d)
	}
	long := &containerState{script: script{restartDelay: 10 * time.Minute}, instances: []instance{{start: start}}}
	if d := long.backOff(start); d != 10*time.Minute {
		t.Errorf("a scripted 10m back-off: %s", d)
	}
}

// TestCrashLoopIsBounded: a container that exits at once and restarts
// with the shortest back-off slows down as the kubelet's does, the mock
// remembers only its current and previous runs, and its CPU time and
// previous log survive the forgetting.
func TestCrashLoopIsBounded(t *testing.T) {
	p, r := newProvider(t)
	ctx := context.Background()
	pod := testPod("crashing", map[string]string{
		AnnotationRunFor: MinRunFor.String(), AnnotationRestartDelay: MinRestartDelay.String(),
		AnnotationExitCode: "1", AnnotationCPUUsage: "1", AnnotationLogInterval: MinLogInterval.String(),
	}, corev1.RestartPolicyAlways)
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "restarted 6 times", func(p *corev1.Pod) bool { return p.Status.ContainerStatuses[0].RestartCount >= 6 })

	// Each back-off the pod reported doubles the one before.
	r.mu.Lock()
	var backOffs []string
	for _, s := range r.pods {
		if w := s.Status.ContainerStatuses[0].State.Waiting; w != nil && w.Reason == "CrashLoopBackOff" {
			backOffs = append(backOffs, strings.Fields(w.Message)[1])
		}
	}
	r.mu.Unlock()
	for i, want := range []string{"10ms", "20ms", "40ms", "80ms", "160ms", "320ms"} {
		if i >= len(backOffs) || backOffs[i] != want {
			t.Fatalf("back-offs reported %v, want them doubling from 10ms", backOffs)
		}
	}

	p.mu.Lock()
	c := p.pods[podKey("ns", "crashing")].containers[0]
	kept, runs, forgotten := len(c.instances), c.runs, c.forgottenCPU
	cpu := p.pods[podKey("ns", "crashing")].cpuTime(time.Now())
	p.mu.Unlock()
	if kept > keptInstances || runs < 7 {
		t.Errorf("%d runs, %d kept, want at most %d kept", runs, kept, keptInstances)
	}
	// One core for 10ms per run: the forgotten runs still count.
	if minimum := uint64(runs-1) * uint64(MinRunFor); forgotten == 0 || cpu < minimum {
		t.Errorf("CPU time %d ns (%d of forgotten runs), want at least %d", cpu, forgotten, minimum)
	}

	rc, err := p.GetContainerLogs(ctx, "ns", "crashing", "app", api.ContainerLogOpts{Previous: true, Tail: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	buf := make([]byte, 64)
	n, _ := rc.Read(buf)
	if !strings.HasPrefix(string(buf[:n]), "ns/crashing/app line 1\n") {
		t.Errorf("previous log: %q, want it from line 1", buf[:n])
	}
}
