package main

import (
	"fmt"
	"io"
	"math"
	"strings"
	"time"
)

// soakQuantity is one figure the soak samples from each daemon.
type soakQuantity int

// The sampled quantities, in the order of the report's rows.
const (
	qGoroutines soakQuantity = iota
	qOpenFDs
	qHeap // live Go heap: what the last GC marked (runtime/metrics /gc/heap/live:bytes)
	qRSS
	numSoakQuantities
)

func (q soakQuantity) String() string {
	return [...]string{"goroutines", "open fds", "Go heap (live)", "RSS"}[q]
}

// format renders a value of q: counts as integers, bytes in MiB.
func (q soakQuantity) format(v float64) string {
	if q == qHeap || q == qRSS {
		return fmt.Sprintf("%.1f MiB", v/(1<<20))
	}
	return fmt.Sprintf("%.0f", v)
}

// soakSample is one daemon's quantities at one moment of the soak.
type soakSample struct {
	At     time.Duration // since the churn started
	Values [numSoakQuantities]float64
}

// parseSoakMetrics reads goroutines, open file descriptors and the Go heap
// from a daemon's /metrics (Prometheus text), naming a family that is
// missing.
func parseSoakMetrics(r io.Reader) (goroutines, fds, heap float64, err error) {
	fams, err := parseMetrics(r)
	if err != nil {
		return 0, 0, 0, fmt.Errorf("parsing /metrics: %w", err)
	}
	var out [3]float64
	for i, name := range []string{"go_goroutines", "process_open_fds", "go_gc_heap_live_bytes"} {
		f := fams[name]
		if f == nil || len(f.GetMetric()) == 0 {
			return 0, 0, 0, fmt.Errorf("/metrics has no %s", name)
		}
		out[i] = f.value(nil)
	}
	return out[0], out[1], out[2], nil
}

// leastSquares is the least-squares line through (xs, ys), y = slope·x +
// intercept; ok is false with fewer than two distinct xs.
func leastSquares(xs, ys []float64) (slope, intercept float64, ok bool) {
	n := float64(len(xs))
	if len(xs) < 2 || len(xs) != len(ys) {
		return 0, 0, false
	}
	var sx, sy float64
	for i := range xs {
		sx += xs[i]
		sy += ys[i]
	}
	mx, my := sx/n, sy/n
	var sxx, sxy float64
	for i := range xs {
		dx := xs[i] - mx
		sxx += dx * dx
		sxy += dx * (ys[i] - my)
	}
	if sxx == 0 {
		return 0, 0, false
	}
	slope = sxy / sxx
	return slope, my - slope*mx, true
}

// soakTolerance is how far the line fitted to a quantity's samples from
// the warm-up on may rise over the run: more is an upward trend, a leak's
// sign. The fitted line, not the first and last samples, decides: a
// quantity such as the live heap moves by a fifth from one sample to the
// next, which two samples alone read as a trend.
const soakTolerance = 0.05

// soakTrend is one quantity of one daemon over the soak.
type soakTrend struct {
	Quantity soakQuantity
	// AtWarmup is the first sample at or after the warm-up, AtEnd the
	// last.
	AtWarmup, AtEnd float64
	// PerHour is the least-squares slope of the samples from the warm-up
	// on, in the quantity's units per hour.
	PerHour float64
	// Change is the fitted line's rise from the warm-up to the end over
	// its value at the warm-up.
	Change float64
	// OK: Change is at most soakTolerance.
	OK bool
}

// verdict says whether the trend holds, and by how much it moved.
func (t soakTrend) verdict() string {
	switch {
	case !t.OK:
		return fmt.Sprintf("**up %+.1f %%** (over %.0f %%)", 100*t.Change, 100*soakTolerance)
	case t.Change < -soakTolerance:
		return fmt.Sprintf("ok (down %.1f %%)", -100*t.Change)
	}
	return fmt.Sprintf("ok (%+.1f %%)", 100*t.Change)
}

// soakTrendOf is q's trend over samples (in time order) after warmup. It
// needs two samples from the warm-up on.
func soakTrendOf(samples []soakSample, warmup time.Duration, q soakQuantity) (soakTrend, error) {
	var xs, ys []float64
	for _, s := range samples {
		if s.At >= warmup {
			xs = append(xs, s.At.Hours())
			ys = append(ys, s.Values[q])
		}
	}
	slope, intercept, ok := leastSquares(xs, ys)
	if !ok {
		return soakTrend{}, fmt.Errorf("%s: %d samples from %s on; a slope needs 2 (run longer than the warm-up plus a sample interval)", q, len(xs), warmup)
	}
	t := soakTrend{Quantity: q, AtWarmup: ys[0], AtEnd: ys[len(ys)-1], PerHour: slope}
	from, to := slope*xs[0]+intercept, slope*xs[len(xs)-1]+intercept
	if from > 0 {
		t.Change = (to - from) / from
	} else if to > from {
		t.Change = math.Inf(1)
	}
	t.OK = t.Change <= soakTolerance
	return t, nil
}

// soakTrendsTable renders each daemon's trends as a Markdown table, one row
// per daemon and quantity, in the daemons' order.
func soakTrendsTable(b *strings.Builder, warmup time.Duration, daemons []string, trends map[string][]soakTrend) {
	w := fmtMinutes(warmup)
	fmt.Fprintf(b, "| daemon | quantity | at %s | at end | slope after %s (per hour) | fitted change | verdict |\n", w, w)
	b.WriteString("|---|---|---:|---:|---:|---:|---|\n")
	for _, d := range daemons {
		for _, t := range trends[d] {
			slope := t.Quantity.format(math.Abs(t.PerHour))
			if t.PerHour < 0 {
				slope = "-" + slope
			} else {
				slope = "+" + slope
			}
			fmt.Fprintf(b, "| %s | %s | %s | %s | %s | %+.1f %% | %s |\n", d, t.Quantity,
				t.Quantity.format(t.AtWarmup), t.Quantity.format(t.AtEnd), slope, 100*t.Change, t.verdict())
		}
	}
}

// fmtMinutes renders d as whole minutes when it is some, e.g. "10 min".
func fmtMinutes(d time.Duration) string {
	if d%time.Minute == 0 {
		return fmt.Sprintf("%d min", int(d/time.Minute))
	}
	return d.String()
}
