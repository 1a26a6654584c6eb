package main

import (
	"math"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

func TestLeastSquares(t *testing.T) {
	for _, tc := range []struct {
		name   string
		xs, ys []float64
		slope  float64
		ok     bool
	}{
		{"line", []float64{0, 1, 2, 3}, []float64{5, 7, 9, 11}, 2, true},
		{"flat", []float64{0, 1, 2}, []float64{4, 4, 4}, 0, true},
		{"falling", []float64{1, 2}, []float64{10, 4}, -6, true},
		// Noise around a line: y = 3x + 1 ± 1, fit exactly by hand.
		{"noisy", []float64{0, 1, 2, 3}, []float64{2, 3, 8, 9}, 2.6, true},
		{"one point", []float64{1}, []float64{1}, 0, false},
		{"same x", []float64{2, 2}, []float64{1, 3}, 0, false},
		{"mismatched", []float64{1, 2}, []float64{1}, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			slope, _, ok := leastSquares(tc.xs, tc.ys)
			if ok != tc.ok || math.Abs(slope-tc.slope) > 1e-9 {
				t.Errorf("leastSquares = %v, %v; want %v, %v", slope, ok, tc.slope, tc.ok)
			}
		})
	}
}

// samples makes one sample a minute of q's values.
func samples(q soakQuantity, values ...float64) []soakSample {
	out := make([]soakSample, len(values))
	for i, v := range values {
		out[i].At = time.Duration(i) * time.Minute
		out[i].Values[q] = v
	}
	return out
}

func TestSoakTrend(t *testing.T) {
	for _, tc := range []struct {
		name     string
		values   []float64
		warmup   time.Duration
		atWarmup float64
		atEnd    float64
		perHour  float64
		ok       bool
		verdict  string
	}{
		// Minutes 0 and 1 are the warm-up; 200 then 202, 204: +2 a minute.
		// The leak: 100, 103, 106, 110 over minutes 1 to 4 fit 3.3 a minute.
		{"within 5 %", []float64{50, 100, 200, 202, 204}, 2 * time.Minute, 200, 204, 120, true, "ok (+2.0 %)"},
		{"exactly 5 %", []float64{100, 100, 105}, time.Minute, 100, 105, 300, true, "ok (+5.0 %)"},
		{"leak", []float64{100, 100, 103, 106, 110}, time.Minute, 100, 110, 198, false, "**up +9.9 %** (over 5 %)"},
		// Noise around a flat line: the last sample is 20 % over the
		// first, the fitted line does not rise.
		{"noise", []float64{100, 100, 130, 90, 80, 100, 120}, time.Minute, 100, 120, 0, true, "ok (+0.0 %)"},
		{"falls", []float64{500, 400, 300}, time.Minute, 400, 300, -6000, true, "ok (down 25.0 %)"},
		// The first sample at or after the warm-up is the baseline.
		{"warm-up between samples", []float64{1, 2, 10, 10}, 90 * time.Second, 10, 10, 0, true, "ok (+0.0 %)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tr, err := soakTrendOf(samples(qGoroutines, tc.values...), tc.warmup, qGoroutines)
			if err != nil {
				t.Fatal(err)
			}
			if tr.AtWarmup != tc.atWarmup || tr.AtEnd != tc.atEnd || math.Abs(tr.PerHour-tc.perHour) > 1e-6 || tr.OK != tc.ok {
				t.Errorf("trend = %+v; want at warm-up %v, at end %v, %v an hour, ok %v", tr, tc.atWarmup, tc.atEnd, tc.perHour, tc.ok)
			}
			if got := tr.verdict(); got != tc.verdict {
				t.Errorf("verdict = %q, want %q", got, tc.verdict)
			}
		})
	}
}

func TestSoakTrendFromZero(t *testing.T) {
	tr, err := soakTrendOf(samples(qOpenFDs, 0, 0, 1), time.Minute, qOpenFDs)
	if err != nil {
		t.Fatal(err)
	}
	if tr.OK || !math.IsInf(tr.Change, 1) {
		t.Errorf("from 0 to 1: %+v, want a missed target", tr)
	}
}

func TestSoakTrendNeedsTwoSamples(t *testing.T) {
	_, err := soakTrendOf(samples(qRSS, 1, 2, 3), 2*time.Minute, qRSS)
	if err == nil || !strings.Contains(err.Error(), "RSS: 1 samples") {
		t.Errorf("one sample after the warm-up: err = %v, want one naming the quantity and the count", err)
	}
}

const daemonMetrics = `# HELP go_goroutines Number of goroutines that currently exist.
# TYPE go_goroutines gauge
go_goroutines 412
# HELP go_gc_heap_live_bytes Heap memory occupied by live objects that were marked by the previous GC. Sourced from /gc/heap/live:bytes.
# TYPE go_gc_heap_live_bytes gauge
go_gc_heap_live_bytes 2.5165824e+07
# HELP process_open_fds Number of open file descriptors.
# TYPE process_open_fds gauge
process_open_fds 57
# HELP workqueue_adds_total Total number of adds handled by workqueue
# TYPE workqueue_adds_total counter
workqueue_adds_total{name="syncPodsFromKubernetes"} 1234
`

func TestParseSoakMetrics(t *testing.T) {
	g, fds, heap, err := parseSoakMetrics(strings.NewReader(daemonMetrics))
	if err != nil {
		t.Fatal(err)
	}
	if g != 412 || fds != 57 || heap != 25165824 {
		t.Errorf("parsed %v goroutines, %v fds, %v heap; want 412, 57, 25165824", g, fds, heap)
	}
}

func TestParseSoakMetricsNamesWhatIsMissing(t *testing.T) {
	without := strings.ReplaceAll(daemonMetrics, "process_open_fds", "other_fds")
	if _, _, _, err := parseSoakMetrics(strings.NewReader(without)); err == nil || !strings.Contains(err.Error(), "process_open_fds") {
		t.Errorf("without process_open_fds: err = %v, want one naming it", err)
	}
	if _, _, _, err := parseSoakMetrics(strings.NewReader("go_goroutines{ 3\n")); err == nil || !strings.Contains(err.Error(), "parsing /metrics") {
		t.Errorf("broken text: err = %v, want a parse error", err)
	}
}

func TestSoakTrendsTable(t *testing.T) {
	var b strings.Builder
	ok, _ := soakTrendOf(samples(qHeap, 0, 100<<20, 101<<20), time.Minute, qHeap)
	up, _ := soakTrendOf(samples(qGoroutines, 0, 100, 120), time.Minute, qGoroutines)
	soakTrendsTable(&b, 10*time.Minute, []string{"a", "b"}, map[string][]soakTrend{"a": {ok}, "b": {up}})
	want := "| daemon | quantity | at 10 min | at end | slope after 10 min (per hour) | fitted change | verdict |\n" +
		"|---|---|---:|---:|---:|---:|---|\n" +
		"| a | Go heap (live) | 100.0 MiB | 101.0 MiB | +60.0 MiB | +1.0 % | ok (+1.0 %) |\n" +
		"| b | goroutines | 100 | 120 | +1200 | +20.0 % | **up +20.0 %** (over 5 %) |\n"
	if b.String() != want {
		t.Errorf("table:\n%s\nwant:\n%s", b.String(), want)
	}
}

func TestTerminalStatusKept(t *testing.T) {
	terminated := func(phase corev1.PodPhase, code int32) *corev1.Pod {
		return &corev1.Pod{Status: corev1.PodStatus{Phase: phase, ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}},
		}}}}
	}
	for _, tc := range []struct {
		name string
		pod  *corev1.Pod
		kind soakPodKind
		want bool
	}{
		{"succeeded 0", terminated(corev1.PodSucceeded, 0), exitsZero, true},
		{"failed 3", terminated(corev1.PodFailed, 3), exitsThree, true},
		{"failed with the wrong code", terminated(corev1.PodFailed, 1), exitsThree, false},
		{"phase without the code", terminated(corev1.PodSucceeded, 3), exitsZero, false},
		{"still running", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}, exitsZero, false},
		{"terminal, no container status", &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodSucceeded}}, exitsZero, false},
	} {
		if got := terminalStatusKept(tc.pod, tc.kind); got != tc.want {
			t.Errorf("%s: %v, want %v", tc.name, got, tc.want)
		}
	}
}

func TestValidSoak(t *testing.T) {
	good := soakConfig{duration: time.Hour, perMinute: 1000, maxInFlight: 500, wideNodes: 50, warmup: 10 * time.Minute,
		interval: time.Minute, bound: 2 * time.Minute, restarts: 2, streamWorkers: 2}
	if err := validSoak(good); err != nil {
		t.Fatalf("defaults: %v", err)
	}
	for _, tc := range []struct {
		flag   string
		change func(*soakConfig)
	}{
		{"-soak-rate", func(c *soakConfig) { c.perMinute = 0 }},
		{"-soak-in-flight", func(c *soakConfig) { c.maxInFlight = 0 }},
		{"-soak-nodes", func(c *soakConfig) { c.wideNodes = 1 }},
		{"-soak-interval", func(c *soakConfig) { c.interval = 0 }},
		{"-soak-warmup", func(c *soakConfig) { c.duration = 10 * time.Minute }},
		{"-soak-bound", func(c *soakConfig) { c.bound = -time.Second }},
		{"-soak-restarts", func(c *soakConfig) { c.restarts = -1 }},
	} {
		c := good
		tc.change(&c)
		if err := validSoak(c); err == nil || !strings.Contains(err.Error(), tc.flag) {
			t.Errorf("bad %s: err = %v, want one naming it", tc.flag, err)
		}
	}
}

func TestSoakOutagesCover(t *testing.T) {
	var o soakOutages
	before := time.Now()
	if o.covers(before) {
		t.Error("no restart yet, but a session is covered")
	}
	i := o.begin()
	if !o.covers(before) {
		t.Error("a session open when a restart began is not covered")
	}
	o.end(i)
	if !o.covers(time.Now()) {
		t.Errorf("a session starting within %s of the restart's end is not covered", outageGrace)
	}
	if o.covers(time.Now().Add(outageGrace + time.Second)) {
		t.Error("a session starting after the grace is covered")
	}
}

func TestSoakOutcomesString(t *testing.T) {
	o := soakOutcomes{Created: 10, Exited: 4, Deleted: 5, Stuck: map[string]int{"not gone": 1}, LostTerminal: 0}
	want := "10 created (0 creates refused until the bound), 4 exited with their status and exit code, 5 deleted while running; stuck: 1 (1 not gone); lost terminal status: 0"
	if got := o.String(); got != want {
		t.Errorf("got %q\nwant %q", got, want)
	}
}
