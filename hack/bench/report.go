package main

import (
	"fmt"
	"math"
	"slices"
	"sort"
	"strings"
	"time"

	k8sprovider "github.com/vkubelet/virtual-kubelet/providers/kubernetes"
)

func ms(d time.Duration) string { return fmt.Sprintf("%.2fs", d.Seconds()) }

// report renders results as Markdown: the table, then where the daemon's
// time went.
func report(results []*result) string {
	var b strings.Builder
	if len(results) > 0 && results[0].Replicas != nil {
		replicasTable(&b, results)
		return b.String()
	}
	if len(results) > 0 && results[0].Remote != nil {
		twoClusterTable(&b, results)
	} else {
		if results[0].Managed {
			b.WriteString("The nodes are Nodes the bench created with kwok's annotation: kwok and the daemon (--manage-*, --kubelet-listener shared) each manage those of their pass; the floor registers its own.\n\n")
		}
		oneClusterTable(&b, results)
		if results[0].Kwok != nil {
			kwokTable(&b, results)
		}
		if results[0].Plugin != nil {
			pluginTable(&b, results)
		}
	}
	repeatsTable(&b, results)
	comparedTable(&b, results)
	for _, r := range results {
		writeMachineCPU(&b, r)
		fmt.Fprintf(&b, "\nN=%s, daemon pass:\n\n", r.size())
		fmt.Fprintf(&b, "- API server pod requests (all clients) during the pass: %s\n", formatCounts(r.APICalls))
		writeDaemonStats(&b, r.Client, r.ProviderCalls, r.Queues)
		if p := r.Plugin; p != nil && len(p.Stats.Clients) > 0 {
			fmt.Fprintf(&b, "\nN=%s, out-of-process pass (the daemon with --provider grpc):\n\n", r.size())
			writeDaemonStats(&b, p.Stats.Clients[0], p.Stats.ProviderCalls, p.Stats.Queues)
		}
		if rr := r.Remote; rr != nil {
			fmt.Fprintf(&b, "- B, last pod: created at %s, bound to the mock node by B's scheduler at %s, Running in B at %s (from the first create in A); gone from B at %s (from the first delete in A)\n",
				ms(rr.Stages.Created), ms(rr.Stages.Scheduled), ms(rr.Stages.Running), ms(rr.Stages.Gone))
			fmt.Fprintf(&b, "- B's API server pod requests (all clients) during the pass: %s\n", formatCounts(rr.APICalls))
			fmt.Fprintf(&b, "- daemon's API requests to B by method and code: %s; %s in the client's rate limiter\n", formatCounts(rr.Client.Requests), ms(rr.Client.LimiterWait))
			fmt.Fprintf(&b, "- B's mock node: %.1fs CPU, peak RSS %.0f MiB\n", rr.Workers.CPU.Seconds(), float64(rr.Workers.PeakRSS)/(1<<20))
		}
	}
	return b.String()
}

// size names r's row: N, and with -repeat the run and the order of its
// passes.
func (r *result) size() string {
	if r.Run == 0 {
		return fmt.Sprint(r.N)
	}
	order := "floor first"
	if r.DaemonFirst {
		order = "daemon first"
	}
	return fmt.Sprintf("%d, run %d (%s)", r.N, r.Run, order)
}

// repeatsTable gives, for each N run more than once (-repeat), each run's
// ratios of the daemon to the floor (and to kwok) and their medians: one
// run's ratio moves with the control plane's state, the median less.
func repeatsTable(b *strings.Builder, results []*result) {
	type ratios struct{ running, gone, kwokRunning, kwokGone []float64 }
	var sizes []int
	byN := map[int]*ratios{}
	for _, r := range results {
		if r.Run == 0 || r.Daemon == nil {
			continue
		}
		x := byN[r.N]
		if x == nil {
			x = &ratios{}
			byN[r.N] = x
			sizes = append(sizes, r.N)
		}
		fr, fg := r.floor()
		x.running = append(x.running, ratio(r.Daemon.AllRunning, fr))
		x.gone = append(x.gone, ratio(r.Daemon.AllGone, fg))
		if r.Kwok != nil {
			x.kwokRunning = append(x.kwokRunning, ratio(r.Daemon.AllRunning, r.Kwok.Pass.AllRunning))
			x.kwokGone = append(x.kwokGone, ratio(r.Daemon.AllGone, r.Kwok.Pass.AllGone))
		}
	}
	if len(sizes) == 0 {
		return
	}
	list := func(v []float64) string {
		if len(v) == 0 {
			return "–"
		}
		parts := make([]string, len(v))
		for i, f := range v {
			parts[i] = fmt.Sprintf("%.2fx", f)
		}
		return fmt.Sprintf("%s (median **%.2fx**)", strings.Join(parts, ", "), median(v))
	}
	var rows [][]string
	for _, n := range sizes {
		x := byN[n]
		rows = append(rows, cells("%d|%d|%s|%s|%s|%s", n, len(x.running), list(x.running), list(x.gone), list(x.kwokRunning), list(x.kwokGone)))
	}
	b.WriteString("\n")
	writeTable(b, "N|runs|all Running ÷ floor, by run|all gone ÷ floor, by run|all Running ÷ kwok|all gone ÷ kwok", rows)
	b.WriteString("\nRuns alternate the order of their passes (odd runs floor first, even runs daemon first).\n")
}

// median is the middle of v, or the mean of the two middle values.
func median(v []float64) float64 {
	s := slices.Clone(v)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// writeMachineCPU lists where the machine's CPU went in each phase of
// each pass: the passes are CPU-bound, and a ratio's cause is there.
func writeMachineCPU(b *strings.Builder, r *result) {
	type namedPass struct {
		name string
		pass *phaseResult
	}
	passes := []namedPass{{"floor", r.Floor}, {"B's floor", r.FloorB}, {"daemon", r.Daemon}}
	if r.Kwok != nil {
		passes = append(passes, namedPass{"kwok", r.Kwok.Pass})
	}
	if r.Plugin != nil {
		passes = append(passes, namedPass{"out of process", r.Plugin.Pass})
	}
	fmt.Fprintf(b, "\nN=%s, where the machine's CPU went (every process, by name):\n\n", r.size())
	for _, p := range passes {
		if p.pass != nil {
			fmt.Fprintf(b, "- %s, create→Running: %s\n- %s, delete→gone: %s\n", p.name, p.pass.RunningCPU, p.name, p.pass.GoneCPU)
		}
	}
	fmt.Fprintf(b, "\nThe same work in every pass (%s), to read the time ratios against: a pass whose same work took more CPU than the floor's ran on a slower machine.\n\n", strings.Join(sameWork, ", "))
	for _, p := range passes[2:] { // after the floors
		if p.pass != nil && r.Floor != nil {
			fmt.Fprintf(b, "- %s, create→Running: %s; delete→gone: %s\n", p.name, p.pass.RunningCPU.speedAgainst(r.Floor.RunningCPU), p.pass.GoneCPU.speedAgainst(r.Floor.GoneCPU))
		}
	}
}

// writeDaemonStats lists a daemon's API requests, provider calls and queues.
func writeDaemonStats(b *strings.Builder, client clientStats, calls map[string]float64, queues []queueStats) {
	fmt.Fprintf(b, "- daemon's API requests by method and code: %s; %s in the client's rate limiter\n", formatCounts(client.Requests), ms(client.LimiterWait))
	fmt.Fprintf(b, "- provider calls by method and result: %s\n", formatCounts(calls))
	for _, q := range queues {
		// client-go's retries metric counts every delayed add: a retry
		// after an error, and a look scheduled ahead (a deleting pod's
		// stop deadline), which is not a failure.
		fmt.Fprintf(b, "- queue %s: %.0f adds, %.0f delayed adds (retries and scheduled looks), mean wait %s, mean work %s\n",
			q.Name, q.Adds, q.Retries, q.MeanWait.Round(time.Microsecond), q.MeanWork.Round(time.Microsecond))
	}
}

func oneClusterTable(b *strings.Builder, results []*result) {
	var rows [][]string
	for _, r := range results {
		floorRunning, floorGone := r.floor()
		rows = append(rows, cells("%s|%d|%s|%s|**%.2fx**|%s|%s|%s|%s|%s|%s|**%.2fx**|%.1fs|%.2f|%.2f|%.0f MiB|%.0f MiB|%.2f%%|%.2f%%",
			r.size(), r.Nodes, ms(floorRunning), ms(r.Daemon.AllRunning), ratio(r.Daemon.AllRunning, floorRunning),
			ms(r.Floor.P50), ms(r.Daemon.P50), ms(r.Floor.P99), ms(r.Daemon.P99),
			ms(floorGone), ms(r.Daemon.AllGone), ratio(r.Daemon.AllGone, floorGone),
			r.Usage.CPU.Seconds(), perThousand(r.floorCPU(), r.N), perThousand(r.Usage.CPU, r.N),
			float64(r.IdleRSS)/(1<<20), float64(r.Usage.PeakRSS)/(1<<20), 100*r.IdleCPU, 100*r.SteadyCPU))
	}
	writeTable(b, "N|nodes|all Running: floor|daemon|ratio|p50 create→Running: floor|daemon|p99: floor|daemon|all gone: floor|daemon|ratio|daemon CPU|CPU s per 1,000 pods: floor|daemon|RSS before|peak RSS|idle CPU|steady CPU", rows)
	b.WriteString("\nCPU per 1,000 pods covers creation to deletion: the daemon's process, and the floor's kubelet work (the bench's CPU in the floor pass less its CPU in the daemon pass, which drives the same pods).\n")
}

// kwokTable sets the daemon beside kwok and the floor, each cell "floor /
// kwok / daemon", with the daemon's ratio to kwok.
func kwokTable(b *strings.Builder, results []*result) {
	var rows [][]string
	three := func(f, k, d time.Duration) string { return ms(f) + " / " + ms(k) + " / " + ms(d) }
	mib := func(v int64) float64 { return float64(v) / (1 << 20) }
	for _, r := range results {
		f, k, d := r.Floor, r.Kwok.Pass, r.Daemon
		rows = append(rows, cells("%s|%d|%s|**%.2fx**|%s|**%.2fx**|%s|%s|%s|%s|%s / %s|%.0f / %.0f MiB|%.0f / %.0f MiB|%.2f / %.2f",
			r.size(), r.Nodes,
			three(f.AllRunning, k.AllRunning, d.AllRunning), ratio(d.AllRunning, k.AllRunning),
			three(f.AllGone, k.AllGone, d.AllGone), ratio(d.AllGone, k.AllGone),
			three(f.P50, k.P50, d.P50), three(f.P99, k.P99, d.P99),
			three(f.GoneP50, k.GoneP50, d.GoneP50), three(f.GoneP99, k.GoneP99, d.GoneP99),
			ms(r.Kwok.NodesReady), ms(r.NodesReady),
			mib(r.Kwok.IdleRSS), mib(r.IdleRSS), mib(r.Kwok.Usage.PeakRSS), mib(r.Usage.PeakRSS),
			perThousand(r.Kwok.Usage.CPU, r.N), perThousand(r.Usage.CPU, r.N)))
	}
	writeTable(b, "N|nodes|all Running: floor / kwok / daemon|daemon÷kwok|all gone: floor / kwok / daemon|daemon÷kwok|p50 create→Running|p99 create→Running|p50 delete→gone|p99 delete→gone|nodes Ready: kwok / daemon|RSS before: kwok / daemon|peak RSS: kwok / daemon|CPU s per 1,000 pods: kwok / daemon", rows)
	b.WriteString("\nkwok runs its fast stages (no bound tokens, no kubelet API); the floor is the bench doing a kubelet's writes. Each pass has the cluster to itself, one after the other.\n")
}

// pluginTable sets the mock out of process (behind --provider grpc) beside
// the mock in process, each cell "in / out".
func pluginTable(b *strings.Builder, results []*result) {
	var rows [][]string
	two := func(in, out time.Duration) string { return ms(in) + " / " + ms(out) }
	for _, r := range results {
		in, out := r.Daemon, r.Plugin.Pass
		rows = append(rows, cells("%s|%s|**%.2fx**|%s|**%.2fx**|%s|%s|%.2f / %.2f + %.2f|%.0f / %.0f + %.0f MiB",
			r.size(), two(in.AllRunning, out.AllRunning), ratio(out.AllRunning, in.AllRunning),
			two(in.AllGone, out.AllGone), ratio(out.AllGone, in.AllGone),
			two(in.P50, out.P50), two(in.P99, out.P99),
			perThousand(r.Usage.CPU, r.N), perThousand(r.Plugin.Daemon.CPU, r.N), perThousand(r.Plugin.Plugin.CPU, r.N),
			float64(r.Usage.PeakRSS)/(1<<20), float64(r.Plugin.Daemon.PeakRSS)/(1<<20), float64(r.Plugin.Plugin.PeakRSS)/(1<<20)))
	}
	writeTable(b, "N|all Running: in process / out|out÷in|all gone: in / out|out÷in|p50 create→Running: in / out|p99: in / out|CPU s per 1,000 pods: in / daemon + plugin|peak RSS: in / daemon + plugin", rows)
	b.WriteString("\nOut of process: the same binary as `virtual-kubelet plugin --provider mock` on a unix socket, the daemon with `--provider grpc`; each pass has the cluster to itself.\n")
}

// replicasTable is the replicas pass: the pods through the replicas as
// ratios to the floor, and what sharing the nodes costs.
func replicasTable(b *strings.Builder, results []*result) {
	var rows [][]string
	mibs := func(vs []int64) string {
		parts := make([]string, len(vs))
		for i, v := range vs {
			parts[i] = fmt.Sprintf("%.0f", float64(v)/(1<<20))
		}
		return strings.Join(parts, " / ") + " MiB"
	}
	for _, r := range results {
		rr := r.Replicas
		rows = append(rows, cells("%d|%d|%s|%s|%.1f|%.1f|%s|%s|%s (%.2fx)|%s (%.2fx)|%s / %s|%s for %d nodes|%d",
			rr.Replicas, r.Nodes, r.size(), ms(rr.NodesReady), rr.HolderWrites, rr.HeartbeatWrites, mibs(rr.IdleRSS), mibs(rr.PeakRSS),
			ms(r.Daemon.AllRunning), ratio(r.Daemon.AllRunning, r.Floor.AllRunning), ms(r.Daemon.AllGone), ratio(r.Daemon.AllGone, r.Floor.AllGone),
			ms(r.Daemon.P50), ms(r.Daemon.P99), ms(rr.Failover), rr.Moved, rr.NotReady))
	}
	writeTable(b, "replicas|nodes|pods|nodes Ready|holder lease writes/s|heartbeat lease writes/s|RSS idle per replica|peak RSS per replica|all Running (÷ floor)|all gone (÷ floor)|p50 / p99 create→Running|failover after SIGKILL|nodes seen not Ready", rows)
	b.WriteString("\nLease writes are counted from watch events over the idle window, all nodes Ready and no pods. The failover is from SIGKILL of the replica holding the most nodes, after the pods' pass, until a live replica holds each of its nodes' holder leases.\n")
}

// twoClusterTable is A→B: the daemon's times as ratios to the sum of A's
// and B's floors.
func twoClusterTable(b *strings.Builder, results []*result) {
	var rows [][]string
	for _, r := range results {
		floorRunning, floorGone := r.floor()
		rows = append(rows, cells("%s|%s|%s|%s|%s|%s|**%.2fx**|%s|%s|%s|%s|%s|%s|**%.2fx**|%.2f|%.2f|%.0f MiB|%.2f%%",
			r.size(), remoteLimits(r.Remote),
			ms(r.Floor.AllRunning), ms(r.FloorB.AllRunning), ms(floorRunning), ms(r.Daemon.AllRunning), ratio(r.Daemon.AllRunning, floorRunning),
			ms(r.Daemon.P50), ms(r.Daemon.P99),
			ms(r.Floor.AllGone), ms(r.FloorB.AllGone), ms(floorGone), ms(r.Daemon.AllGone), ratio(r.Daemon.AllGone, floorGone),
			perThousand(r.Usage.CPU, r.N), perThousand(r.Remote.Workers.CPU, r.N),
			float64(r.Usage.PeakRSS)/(1<<20), 100*r.SteadyCPU))
	}
	writeTable(b, "N|remote qps/burst|all Running: floor A|floor B|A+B|A→B|ratio|p50 create→Running: A→B|p99|all gone: floor A|floor B|A+B|A→B|ratio|CPU s per 1,000 pods: daemon in A|mock in B|peak RSS of the daemon in A|steady CPU", rows)
	b.WriteString("\nRatios are to A's floor plus B's floor, each measured in the same run. CPU per 1,000 pods covers creation to deletion (the steady window left out): the daemon in A (kubernetes provider) and B's mock node.\n")
}

// cells formats one row, its cells separated by | in format.
func cells(format string, args ...any) []string {
	return strings.Split(fmt.Sprintf(format, args...), "|")
}

// writeTable writes a Markdown table; header's cells are separated by |.
func writeTable(b *strings.Builder, header string, rows [][]string) {
	head := strings.Split(header, "|")
	b.WriteString("| " + strings.Join(head, " | ") + " |\n")
	b.WriteString(strings.Repeat("|---", len(head)) + "|\n")
	for _, row := range rows {
		b.WriteString("| " + strings.Join(row, " | ") + " |\n")
	}
}

// remoteLimits is the provider's remote client limits of the run.
func remoteLimits(r *remoteResult) string {
	if r.QPS == 0 && r.Burst == 0 {
		return fmt.Sprintf("%d/%d (default)", k8sprovider.DefaultQPS, k8sprovider.DefaultBurst)
	}
	qps, burst := r.QPS, r.Burst
	if qps == 0 {
		qps = k8sprovider.DefaultQPS
	}
	if burst == 0 {
		burst = k8sprovider.DefaultBurst
	}
	return fmt.Sprintf("%g/%d", qps, burst)
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
	peers := []*phaseResult{r.Floor, r.FloorB, r.Daemon}
	if r.Kwok != nil {
		peers = append(peers, r.Kwok.Pass)
	}
	for _, p := range peers {
		if p == nil {
			continue
		}
		for _, l := range p.Latencies {
			maxLat = math.Max(maxLat, l.Seconds())
		}
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
	type series struct {
		name   string
		color  string
		values []time.Duration
	}
	all := []series{{"floor (the bench as kubelet)", "#888", r.Floor.Latencies}, {"virtual-kubelet + mock", "#1f77b4", r.Daemon.Latencies}}
	if r.Kwok != nil {
		all = append(all, series{"kwok (fast stages)", "#ff7f0e", r.Kwok.Pass.Latencies})
	}
	if r.FloorB != nil {
		all = []series{{"floor A (the bench as kubelet)", "#888", r.Floor.Latencies}, {"floor B", "#bbb", r.FloorB.Latencies},
			{"A→B: virtual-kubelet (kubernetes) + B's mock", "#1f77b4", r.Daemon.Latencies}}
	}
	for i, series := range all {
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
