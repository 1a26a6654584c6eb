package main

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"time"

	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
)

// soakNodePrefix starts the names of the soak's daemons and nodes.
const soakNodePrefix = "soak-"

// soakConfig is the soak's part of the command line (-soak and the flags
// after it).
type soakConfig struct {
	duration time.Duration // 0: no soak, the bench passes
	// perMinute pods are created a minute, over all nodes.
	perMinute int
	// maxInFlight bounds the pods alive at once.
	maxInFlight int
	// wideNodes is the node count of the second daemon.
	wideNodes int
	// warmup is when the trends start: the values then are the baseline.
	warmup   time.Duration
	interval time.Duration // between samples
	// bound is how long a pod may take to reach each expected state.
	bound time.Duration
	// restarts of the API server, evenly spread over the run.
	restarts int
	// streamWorkers run each kind of session (logs -f, exec, port-forward).
	streamWorkers int
	// clusterBinary is bin/cluster, which restarts the API server.
	clusterBinary string
}

// soakDaemon is one daemon of the soak and its samples.
type soakDaemon struct {
	*benchDaemon
	name    string
	nodes   []string
	host    *nethost.Host
	samples []soakSample
}

// sample reads the daemon's quantities: goroutines, open fds and the live
// heap (as the last GC marked it) from /metrics, RSS from /proc.
func (d *soakDaemon) sample(ctx context.Context, at time.Duration) error {
	if d.Exited() {
		return fmt.Errorf("daemon %s exited: %v (log: %s)", d.name, d.Err(), d.logPath)
	}
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.metricsAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return fmt.Errorf("daemon %s: %w", d.name, err)
	}
	defer resp.Body.Close()
	g, fds, heap, err := parseSoakMetrics(resp.Body)
	if err != nil {
		return fmt.Errorf("daemon %s: %w", d.name, err)
	}
	s := soakSample{At: at}
	s.Values[qGoroutines], s.Values[qOpenFDs], s.Values[qHeap] = g, fds, heap
	s.Values[qRSS] = float64(d.usage().RSS)
	d.samples = append(d.samples, s)
	return nil
}

// runSoak runs the soak against the cluster in c.clusterDir and reports.
func runSoak(ctx context.Context, c config) error {
	sc := c.soak
	a, err := openCluster(c.clusterDir)
	if err != nil {
		return err
	}
	if a.info.NodeNetwork == nil {
		return errors.New("the soak needs the cluster's node network (make cluster-up as root): the API server proxies logs, exec and port-forward only to node hosts")
	}
	if sc.restarts > 0 {
		if _, err := os.Stat(sc.clusterBinary); err != nil {
			return fmt.Errorf("-cluster-binary (bin/cluster, to restart the API server): %w", err)
		}
	}
	restCfg, err := a.info.RESTConfig()
	if err != nil {
		return err
	}
	restCfg.QPS = -1
	metrics, err := metricsclient.NewForConfig(restCfg)
	if err != nil {
		return err
	}
	removeBinary, err := ensureBinary(&c)
	if err != nil {
		return err
	}
	defer removeBinary()
	ns, err := namespace(ctx, a.client, "soak")
	if err != nil {
		return err
	}

	daemons, err := startSoakDaemons(ctx, c, a.info)
	var nodes []string
	for _, d := range daemons {
		nodes = append(nodes, d.nodes...)
	}
	defer func() {
		// The daemons first, lest they register their nodes again.
		for _, d := range daemons {
			d.stop()
			_ = d.host.Delete(context.Background())
		}
		cleanup(a.client, ns, nodes)
	}()
	if err != nil {
		return err
	}
	for _, d := range daemons {
		for _, n := range d.nodes {
			if err := waitNodeReady(ctx, a.client, n); err != nil {
				return fmt.Errorf("node %s: %w (log: %s)", n, err, d.logPath)
			}
		}
	}
	watch, err := startSoakWatch(ctx, a.client, ns)
	if err != nil {
		return err
	}
	churn := &soakChurn{client: a.client, ns: ns, watch: watch, bound: sc.bound}
	outages := &soakOutages{}
	streams := &soakStreams{client: a.client, rest: restCfg, metrics: metrics, ns: ns, watch: watch, outages: outages, counts: map[string]*streamCount{}}

	logf("soak: %s, %d pods a minute on %d nodes, %d API server restarts; samples every %s", sc.duration, sc.perMinute, len(nodes), sc.restarts, sc.interval)
	start := time.Now()
	runCtx, stopRun := context.WithDeadline(ctx, start.Add(sc.duration))
	defer stopRun()
	// Half the pods go to the one-node daemon, half over the wide one's
	// nodes: each process gets the same churn.
	var targets []string
	for _, n := range daemons[1].nodes {
		targets = append(targets, daemons[0].nodes[0], n)
	}
	var wg sync.WaitGroup
	wg.Go(func() { churn.run(runCtx, ctx, sc.perMinute, sc.maxInFlight, targets) })
	wg.Go(func() { streams.run(runCtx, sc.streamWorkers) })
	var restarts []string
	wg.Go(func() { restarts = restartAPIServer(runCtx, c, start, outages) })
	sampleErr := sampleSoak(ctx, sc, start, daemons)
	stopRun()
	logf("soak: the run is over; waiting for the pods in flight")
	wg.Wait()
	if sampleErr != nil {
		return sampleErr
	}

	text, ok, err := soakReport(c, daemons, churn.outcomes, streams.summary(), restarts, time.Since(start))
	if err != nil {
		return err
	}
	fmt.Println(text)
	if c.outDir != "" {
		if err := writeSoakFiles(c.outDir, text, daemons); err != nil {
			return err
		}
		logf("results in %s", c.outDir)
	}
	if !ok {
		return errors.New("the soak missed a target (see the report)")
	}
	return nil
}

// startSoakDaemons starts the one-node daemon and the wide one, each in a
// node host of its own.
func startSoakDaemons(ctx context.Context, c config, info *controlplane.Info) ([]*soakDaemon, error) {
	var daemons []*soakDaemon
	for _, s := range []struct {
		name  string
		nodes int
	}{{soakNodePrefix + "one", 1}, {soakNodePrefix + "wide", c.soak.wideNodes}} {
		host, err := info.NodeNetwork.Host(ctx, s.name)
		if err != nil { // none left by an interrupted soak
			if host, err = info.NodeNetwork.AddHost(ctx, s.name); err != nil {
				return daemons, err
			}
		}
		bd, err := startDaemon(ctx, c, daemonSpec{
			name: s.name, nodes: s.nodes, kubeconfig: info.NodeKubeconfig,
			provider: []string{"--provider", "mock"}, host: host, extra: c.daemonArgs,
		})
		if err != nil {
			_ = host.Delete(context.Background())
			return daemons, err
		}
		daemons = append(daemons, &soakDaemon{benchDaemon: bd, name: s.name, nodes: nodeNames(s.name, s.nodes), host: host})
	}
	return daemons, nil
}

// sampleSoak samples every daemon every interval from start, and once at
// the end of the run.
func sampleSoak(ctx context.Context, sc soakConfig, start time.Time, daemons []*soakDaemon) error {
	var at []time.Duration
	for t := time.Duration(0); t < sc.duration; t += sc.interval {
		at = append(at, t)
	}
	at = append(at, sc.duration)
	for _, t := range at {
		select {
		case <-time.After(time.Until(start.Add(t))):
		case <-ctx.Done():
			return ctx.Err()
		}
		for _, d := range daemons {
			if err := d.sample(ctx, t); err != nil {
				return err
			}
		}
		for _, d := range daemons {
			s := d.samples[len(d.samples)-1]
			logf("soak %s: %s: %.0f goroutines, %.0f fds, heap %.1f MiB, RSS %.1f MiB", t.Truncate(time.Second), d.name,
				s.Values[qGoroutines], s.Values[qOpenFDs], s.Values[qHeap]/(1<<20), s.Values[qRSS]/(1<<20))
		}
	}
	return nil
}

// restartAPIServer restarts the API server c.soak.restarts times, evenly
// spread over the run, through bin/cluster; it returns what each restart
// took.
func restartAPIServer(ctx context.Context, c config, start time.Time, outages *soakOutages) []string {
	var out []string
	for k := 1; k <= c.soak.restarts; k++ {
		at := c.soak.duration * time.Duration(k) / time.Duration(c.soak.restarts+1)
		select {
		case <-time.After(time.Until(start.Add(at))):
		case <-ctx.Done():
			return out
		}
		logf("soak: restarting the API server")
		i := outages.begin()
		began := time.Now()
		cmdOut, err := exec.CommandContext(ctx, c.soak.clusterBinary, "restart", "--dir", c.clusterDir, controlplane.APIServer).CombinedOutput()
		outages.end(i)
		took := time.Since(began).Round(100 * time.Millisecond)
		if err != nil {
			out = append(out, fmt.Sprintf("at %s: failed after %s: %v %s", fmtMinutes(at), took, err, strings.TrimSpace(string(cmdOut))))
			continue
		}
		out = append(out, fmt.Sprintf("at %s: down and back in %s", fmtMinutes(at), took))
	}
	return out
}

// soakReport renders the soak's report and says whether every target held:
// no upward trend, no pod stuck, no terminal status lost.
func soakReport(c config, daemons []*soakDaemon, o soakOutcomes, streams, restarts []string, took time.Duration) (string, bool, error) {
	sc := c.soak
	var b strings.Builder
	names := make([]string, len(daemons))
	trends := map[string][]soakTrend{}
	ok := o.stuck() == 0 && o.LostTerminal == 0 && o.CreateFailed == 0
	for i, d := range daemons {
		names[i] = fmt.Sprintf("%s (%d nodes)", d.name, len(d.nodes))
		if len(d.nodes) == 1 {
			names[i] = d.name + " (1 node)"
		}
		for q := range numSoakQuantities {
			t, err := soakTrendOf(d.samples, sc.warmup, q)
			if err != nil {
				return "", false, fmt.Errorf("daemon %s: %w", d.name, err)
			}
			trends[names[i]] = append(trends[names[i]], t)
			ok = ok && t.OK
		}
	}
	verdict := "all targets held"
	if !ok {
		verdict = "a target was missed"
	}
	fmt.Fprintf(&b, "Soak of %s (%s with the drain), %d pods a minute requested, %d API server restarts, %d CPUs: %s.\n\n",
		sc.duration, took.Round(time.Second), sc.perMinute, sc.restarts, runtime.NumCPU(), verdict)
	soakTrendsTable(&b, sc.warmup, names, trends)
	b.WriteString("\n")
	fmt.Fprintf(&b, "- pods: %s; %.0f created a minute\n", o, float64(o.Created)/sc.duration.Minutes())
	for _, r := range restarts {
		fmt.Fprintf(&b, "- API server restart %s\n", r)
	}
	for _, s := range streams {
		fmt.Fprintf(&b, "- %s\n", s)
	}
	fmt.Fprintf(&b, "- the heap is Go's live heap as its last GC marked it (go_gc_heap_live_bytes); the slope is the least-squares fit of the samples from %s on\n", fmtMinutes(sc.warmup))
	return b.String(), ok, nil
}

// writeSoakFiles writes the report (soak.md) and every sample
// (samples.csv) to dir.
func writeSoakFiles(dir, text string, daemons []*soakDaemon) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, "soak.md"), []byte(text), 0o644); err != nil {
		return err
	}
	var b strings.Builder
	b.WriteString("daemon,seconds,goroutines,open_fds,heap_bytes,rss_bytes\n")
	for _, d := range daemons {
		for _, s := range d.samples {
			fmt.Fprintf(&b, "%s,%.0f,%.0f,%.0f,%.0f,%.0f\n", d.name, s.At.Seconds(), s.Values[qGoroutines], s.Values[qOpenFDs], s.Values[qHeap], s.Values[qRSS])
		}
	}
	return os.WriteFile(filepath.Join(dir, "samples.csv"), []byte(b.String()), 0o644)
}

// validSoak checks the soak's flags.
func validSoak(sc soakConfig) error {
	switch {
	case sc.perMinute < 1 || sc.perMinute > 60000:
		return fmt.Errorf("-soak-rate must be from 1 to 60000 pods a minute, got %d", sc.perMinute)
	case sc.maxInFlight < 1:
		return fmt.Errorf("-soak-in-flight must be at least 1, got %d", sc.maxInFlight)
	case sc.wideNodes < 2:
		return fmt.Errorf("-soak-nodes must be at least 2 (the other daemon has one), got %d", sc.wideNodes)
	case sc.interval <= 0:
		return fmt.Errorf("-soak-interval must be positive, got %s", sc.interval)
	case sc.warmup < 0 || sc.warmup+sc.interval > sc.duration:
		return fmt.Errorf("-soak %s must be at least -soak-warmup %s plus -soak-interval %s: a trend needs two samples after the warm-up", sc.duration, sc.warmup, sc.interval)
	case sc.bound <= 0:
		return fmt.Errorf("-soak-bound must be positive, got %s", sc.bound)
	case sc.restarts < 0:
		return fmt.Errorf("-soak-restarts must not be negative, got %d", sc.restarts)
	case sc.streamWorkers < 0:
		return fmt.Errorf("-soak-stream-workers must not be negative, got %d", sc.streamWorkers)
	}
	return nil
}
