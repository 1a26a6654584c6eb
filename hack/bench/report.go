package main

import (
	"fmt"
	"math"
	"sort"
	"strings"
	"time"
)

func ms(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// report renders results as Markdown: the table, then where the daemon's
// time went.
func report(results []*result) string {
	var b strings.Builder
	b.WriteString("| N | nodes | all Running: floor | daemon | ratio | p50 create→Running: floor | daemon | p99: floor | daemon | all gone: floor | daemon | ratio | daemon CPU | CPU s per 1,000 pods: floor | daemon | RSS before | peak RSS | idle CPU | steady CPU |\n")
	b.WriteString("|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n")
	for _, r := range results {
		fmt.Fprintf(&b, "| %d | %d | %s | %s | **%.2fx** | %s | %s | %s | %s | %s | %s | **%.2fx** | %.1fs | %.2f | %.2f | %.0f MiB | %.0f MiB | %.2f%% | %.2f%% |\n",
			r.N, r.Nodes, ms(r.Floor.AllRunning), ms(r.Daemon.AllRunning), ratio(r.Daemon.AllRunning, r.Floor.AllRunning),
			ms(r.Floor.P50), ms(r.Daemon.P50), ms(r.Floor.P99), ms(r.Daemon.P99),
			ms(r.Floor.AllGone), ms(r.Daemon.AllGone), ratio(r.Daemon.AllGone, r.Floor.AllGone),
			r.Usage.CPU.Seconds(), perThousand(r.floorCPU(), r.N), perThousand(r.Usage.CPU, r.N),
			float64(r.IdleRSS)/(1<<20), float64(r.Usage.PeakRSS)/(1<<20), 100*r.IdleCPU, 100*r.SteadyCPU)
	}
	b.WriteString("\nCPU per 1,000 pods covers creation to deletion: the daemon's process, and the floor's kubelet work (the bench's CPU in the floor pass less its CPU in the daemon pass, which drives the same pods).\n")
	for _, r := range results {
		fmt.Fprintf(&b, "\nN=%d, daemon pass:\n\n", r.N)
		fmt.Fprintf(&b, "- API server pod requests (all clients) during the pass: %s\n", formatCounts(r.APICalls))
		fmt.Fprintf(&b, "- daemon's API requests by method and code: %s\n", formatCounts(r.DaemonRequests))
		for _, q := range r.Queues {
			fmt.Fprintf(&b, "- queue %s: %.0f adds, %.0f retries, mean wait %s, mean work %s\n",
				q.Name, q.Adds, q.Retries, q.MeanWait.Round(time.Microsecond), q.MeanWork.Round(time.Microsecond))
		}
	}
	return b.String()
}

func formatCounts(m map[string]float64) string {
	keys := make([]string, 0, len(m))
	for k, v := range m {
		if v != 0 {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	parts := make([]string, len(keys))
	for i, k := range keys {
		parts[i] = fmt.Sprintf("%s=%.0f", k, m[k])
	}
	return strings.Join(parts, ", ")
}

// latencyPlot draws the distribution (CDF) of create→Running latency of
// both passes as an SVG.
func latencyPlot(r *result) string {
	const w, h, left, bottom, top, right = 640.0, 400.0, 60.0, 50.0, 40.0, 20.0
	maxLat := 0.0
	for _, l := range append(append([]time.Duration(nil), r.Floor.Latencies...), r.Daemon.Latencies...) {
		maxLat = math.Max(maxLat, l.Seconds())
	}
	maxLat = niceCeil(maxLat)
	x := func(s float64) float64 { return left + (w-left-right)*s/maxLat }
	y := func(f float64) float64 { return h - bottom - (h-bottom-top)*f }
	var b strings.Builder
	fmt.Fprintf(&b, `<svg xmlns="http://www.w3.org/2000/svg" width="%.0f" height="%.0f" font-family="sans-serif" font-size="12">`+"\n", w, h)
	fmt.Fprintf(&b, `<rect width="100%%" height="100%%" fill="white"/>`+"\n")
	fmt.Fprintf(&b, `<text x="%.0f" y="20" font-size="14">create→Running latency, N=%d (CDF)</text>`+"\n", left, r.N)
	for i := 0; i <= 4; i++ {
		f := float64(i) / 4
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="end">%.0f%%</text>`+"\n",
			left, y(f), w-right, y(f), left-5, y(f)+4, 100*f)
		s := maxLat * f
		fmt.Fprintf(&b, `<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="#ddd"/><text x="%.1f" y="%.1f" text-anchor="middle">%.3gs</text>`+"\n",
			x(s), y(0), x(s), y(1), x(s), h-bottom+18, s)
	}
	fmt.Fprintf(&b, `<text x="%.1f" y="%.1f" text-anchor="middle">seconds after creation</text>`+"\n", (left+w-right)/2, h-10)
	for i, series := range []struct {
		name   string
		color  string
		values []time.Duration
	}{{"floor (the bench as kubelet)", "#888", r.Floor.Latencies}, {"virtual-kubelet + mock", "#1f77b4", r.Daemon.Latencies}} {
		var pts []string
		for j, l := range series.values {
			pts = append(pts, fmt.Sprintf("%.1f,%.1f", x(l.Seconds()), y(float64(j+1)/float64(len(series.values)))))
		}
		fmt.Fprintf(&b, `<polyline fill="none" stroke="%s" stroke-width="2" points="%s"/>`+"\n", series.color, strings.Join(pts, " "))
		fmt.Fprintf(&b, `<rect x="%.1f" y="%.1f" width="12" height="3" fill="%s"/><text x="%.1f" y="%.1f">%s</text>`+"\n",
			left+10, top+10+float64(i)*16, series.color, left+28, top+14+float64(i)*16, series.name)
	}
	b.WriteString("</svg>\n")
	return b.String()
}

// niceCeil rounds up to 1, 2 or 5 times a power of ten.
func niceCeil(v float64) float64 {
	if v <= 0 {
		return 1
	}
	p := math.Pow(10, math.Floor(math.Log10(v)))
	for _, m := range []float64{1, 2, 5, 10} {
		if v <= m*p {
			return m * p
		}
	}
	return 10 * p
}
