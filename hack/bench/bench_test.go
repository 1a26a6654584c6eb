//go:build e2e

package main

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// testDaemon is the race-built daemon the e2e packages share ($VK_TEST_DAEMON
// under make test), or one built for the test. The smoke tests check the
// bench's mechanics, not its times; a daemon built without -race, as
// `make bench` runs, would compile the whole graph once more.
func testDaemon(t *testing.T) string {
	t.Helper()
	path, remove, err := childproc.BuildDaemon()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(remove)
	return path
}

// TestBenchSmoke runs the whole bench, floor and daemon (in process and
// out of process), with 100 pods: every pod must reach Running and be gone
// in each pass, and the daemon must write each pod's status with a bounded
// number of requests. It asserts no timings: those are for `make bench` on
// a quiet machine.
func TestBenchSmoke(t *testing.T) {
	c := testcluster.Shared(t)
	const n = 100
	out := t.TempDir()
	results, err := run(context.Background(), config{
		clusterDir: c.Info.Dir,
		binary:     testDaemon(t),
		sizes:      []int{n},
		workers:    20,
		outDir:     out,
		plugin:     true,
		// One pass to show the API server's and the processes' profiles
		// are taken, per phase.
		apiServerProfile: true,
		processProfile:   true,
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 1 {
		t.Fatalf("got %d results, want 1", len(results))
	}
	r := results[0]
	for name, p := range map[string]*phaseResult{"floor": r.Floor, "daemon": r.Daemon} {
		if len(p.Latencies) != n {
			t.Errorf("%s: %d create→Running latencies, want %d", name, len(p.Latencies), n)
		}
		if p.AllRunning <= 0 || p.AllGone <= 0 || p.P50 > p.P99 {
			t.Errorf("%s: implausible timings %+v", name, *p)
		}
	}
	if r.Usage.CPU <= 0 || r.Usage.PeakRSS <= 0 {
		t.Errorf("daemon usage not measured: %+v", r.Usage)
	}
	// The same pods through the mock out of process.
	if p := r.Plugin; p == nil || len(p.Pass.Latencies) != n || p.Pass.AllGone <= 0 || p.Plugin.CPU <= 0 || p.Daemon.CPU <= 0 {
		t.Errorf("out-of-process pass incomplete: %+v", p)
	}
	if r.BenchCPU.Floor <= 0 || r.BenchCPU.Daemon <= 0 {
		t.Errorf("the bench's own CPU not measured: %+v", r.BenchCPU)
	}
	// Each pod's status goes Pending→Running and then to its terminal state
	// before deletion: a few patches per pod, not a retry storm.
	patches := r.Client.Requests["PATCH 200"]
	if patches < n || patches > 4*n {
		t.Errorf("daemon sent %.0f successful PATCHes for %d pods; requests: %v", patches, n, r.Client.Requests)
	}
	var syncQueue bool
	for _, q := range r.Queues {
		if q.Name == "syncPodsFromKubernetes" && q.Adds >= n {
			syncQueue = true
		}
	}
	if !syncQueue {
		t.Errorf("queue metrics missing or short: %+v", r.Queues)
	}
	report, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(report), fmt.Sprintf("| %d |", n)) {
		t.Errorf("results.md has no row for N=%d:\n%s", n, report)
	}
	if _, err := os.Stat(filepath.Join(out, fmt.Sprintf("latency-%d.svg", n))); err != nil {
		t.Error(err)
	}
	// The floor writes what a kubelet writes, as the daemon does: the same
	// fields, so that neither pays for bytes the other does not send.
	for _, phase := range []corev1.PodPhase{corev1.PodRunning, corev1.PodSucceeded} {
		floor, daemon := fieldPaths(t, r.Floor.Written[phase]), fieldPaths(t, r.Daemon.Written[phase])
		if len(daemon) == 0 || !slices.Equal(floor, daemon) {
			t.Errorf("%s status fields differ\nfloor:  %v\ndaemon: %v", phase, floor, daemon)
		}
	}
	for _, pass := range []string{"floor", "daemon", "plugin"} {
		for _, phase := range []string{"running", "gone"} {
			checkProfiles(t, filepath.Join(out, fmt.Sprintf("apiserver-cpu-%s-%d-%s-*.pb.gz", pass, n, phase)))
		}
	}
	for _, process := range []string{"daemon", "grpc-daemon", "plugin"} {
		for _, phase := range []string{"running", "gone"} {
			checkProfiles(t, filepath.Join(out, fmt.Sprintf("%s-cpu-%d-%s-*.pb.gz", process, n, phase)))
		}
	}
}

// fieldPaths lists the fields set in s, as JSON paths, sorted.
func fieldPaths(t *testing.T, s corev1.PodStatus) []string {
	raw, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		t.Fatal(err)
	}
	var paths []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		switch v := v.(type) {
		case map[string]any:
			for k, x := range v {
				walk(prefix+"."+k, x)
			}
		case []any:
			for _, x := range v {
				walk(prefix+"[]", x)
			}
		default:
			paths = append(paths, prefix)
		}
	}
	walk("", v)
	slices.Sort(paths)
	return slices.Compact(paths)
}

// checkProfiles checks that pattern names at least one file and that each
// is a gzipped profile, not an error page.
func checkProfiles(t *testing.T, pattern string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Errorf("no profiles %s (%v)", pattern, err)
		return
	}
	for _, f := range files {
		raw, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			t.Errorf("%s is not gzipped: %v (%.100q)", f, err, raw)
			continue
		}
		if body, err := io.ReadAll(zr); err != nil || len(body) == 0 {
			t.Errorf("%s: %d bytes of profile, %v", f, len(body), err)
		}
	}
}

// TestBenchSmokeManyNodes runs the bench with pods spread over three nodes:
// the floor registers three, kwok manages three (when VK_KWOK_DIR names
// hack/kwok/build.sh's output; make test leaves it unset, as make bench runs
// kwok every time), the daemon runs three
// with --node-count, and every pod reaches Running and is gone in each pass.
func TestBenchSmokeManyNodes(t *testing.T) {
	c := testcluster.Shared(t)
	const n, nodes = 30, 3
	kwokDir := os.Getenv("VK_KWOK_DIR")
	if kwokDir == "" {
		t.Log("VK_KWOK_DIR is not set: no kwok pass")
	}
	// Two runs, the second making its passes in the reverse order.
	out := t.TempDir()
	results, err := run(context.Background(), config{clusterDir: c.Info.Dir, binary: testDaemon(t), sizes: []int{n}, nodes: nodes, workers: 10, kwokDir: kwokDir, repeat: 2, outDir: out})
	if err != nil {
		t.Fatal(err)
	}
	if len(results) != 2 || results[0].Run != 1 || results[0].DaemonFirst || results[1].Run != 2 || !results[1].DaemonFirst {
		t.Fatalf("got %d results, want run 1 floor first and run 2 daemon first", len(results))
	}
	for _, r := range results {
		if daemonFirst := r.Daemon.Start.Before(r.Floor.Start); daemonFirst != r.DaemonFirst {
			t.Errorf("run %d: daemon pass started at %v, floor's at %v; want daemon first: %v", r.Run, r.Daemon.Start, r.Floor.Start, r.DaemonFirst)
		}
		if r.Nodes != nodes || len(r.Floor.Latencies) != n || len(r.Daemon.Latencies) != n {
			t.Errorf("run %d: nodes %d, latencies floor %d daemon %d; want %d nodes and %d each", r.Run, r.Nodes, len(r.Floor.Latencies), len(r.Daemon.Latencies), nodes, n)
		}
		if r.Daemon.GoneP50 <= 0 || r.Daemon.GoneP50 > r.Daemon.GoneP99 {
			t.Errorf("run %d: daemon's delete→gone percentiles implausible: p50 %v p99 %v", r.Run, r.Daemon.GoneP50, r.Daemon.GoneP99)
		}
		if _, err := os.Stat(filepath.Join(out, fmt.Sprintf("run-%d", r.Run), fmt.Sprintf("latency-%d.svg", n))); err != nil {
			t.Error(err)
		}
		if kwokDir != "" && (r.Kwok == nil || len(r.Kwok.Pass.Latencies) != n) {
			t.Errorf("run %d: kwok pass incomplete: %+v", r.Run, r.Kwok)
		}
	}
	text, err := os.ReadFile(filepath.Join(out, "results.md"))
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{fmt.Sprintf("| %d, run 1 (floor first) | %d |", n, nodes), fmt.Sprintf("| %d, run 2 (daemon first) | %d |", n, nodes), fmt.Sprintf("| %d | 2 |", n), "median"} {
		if !strings.Contains(string(text), want) {
			t.Errorf("results.md lacks %q:\n%s", want, text)
		}
	}
	r := results[1]
	if kwokDir == "" {
		return
	}
	k := r.Kwok
	if k == nil || len(k.Pass.Latencies) != n || k.Pass.AllRunning <= 0 || k.Pass.AllGone <= 0 || k.NodesReady <= 0 {
		t.Fatalf("kwok pass incomplete: %+v", k)
	}
	if k.Usage.CPU <= 0 || k.Usage.PeakRSS <= 0 {
		t.Errorf("kwok's usage not measured: %+v", k.Usage)
	}
	if !strings.Contains(report(results), "all Running: floor / kwok / daemon") {
		t.Errorf("report has no kwok table:\n%s", report(results))
	}
}

// TestBenchSmokeTwoClusters runs A→B with 40 pods, the shared cluster as A
// and a private one as B: both floors and the daemon pass complete, every
// pod of the daemon pass went through B (created there, bound to B's mock
// node, Running, gone), and the daemon's requests to B are counted apart
// from those to A.
func TestBenchSmokeTwoClusters(t *testing.T) {
	a, b := testcluster.Shared(t), testcluster.Private(t)
	const n = 40
	results, err := run(context.Background(), config{clusterDir: a.Info.Dir, binary: testDaemon(t), remoteDir: b.Info.Dir, sizes: []int{n}, nodes: 1, workers: 10})
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	if r.FloorB == nil || r.Remote == nil {
		t.Fatalf("no floor B or remote result: %+v", r)
	}
	for name, p := range map[string]*phaseResult{"floor A": r.Floor, "floor B": r.FloorB, "A→B": r.Daemon} {
		if len(p.Latencies) != n || p.AllRunning <= 0 || p.AllGone <= 0 {
			t.Errorf("%s: %d latencies (want %d), timings %v %v", name, len(p.Latencies), n, p.AllRunning, p.AllGone)
		}
	}
	s := r.Remote.Stages
	if s.Created <= 0 || s.Scheduled < s.Created || s.Running < s.Scheduled || s.Gone <= 0 {
		t.Errorf("B's stages not all reached in order: %+v", s)
	}
	if got := r.Remote.Client.Requests["POST 201"]; got < n {
		t.Errorf("daemon created %.0f pods in B, want at least %d; requests to B: %v", got, n, r.Remote.Client.Requests)
	}
	if got := r.Client.Requests["POST 201"]; got >= n {
		t.Errorf("requests to A counted %.0f creations: B's requests leak into A's; requests to A: %v", got, r.Client.Requests)
	}
	if r.Remote.Workers.CPU <= 0 || r.Usage.CPU <= 0 {
		t.Errorf("CPU not measured: daemon %v, B's mock %v", r.Usage.CPU, r.Remote.Workers.CPU)
	}
	if !strings.Contains(report(results), "| 40 | 500/1000 (default) |") {
		t.Errorf("report has no A→B row for 40 pods:\n%s", report(results))
	}
}

// TestBenchSmokeReplicas runs the replicas pass: 3 daemons with
// --leader-elect share 3 nodes; every pod reaches Running and is gone, the
// holder leases are renewed in the idle window, each replica's memory is
// read, and the killed replica's node moves without any node going
// NotReady.
func TestBenchSmokeReplicas(t *testing.T) {
	c := testcluster.Shared(t)
	const n, nodes, replicas = 30, 3, 3
	results, err := run(context.Background(), config{clusterDir: c.Info.Dir, binary: testDaemon(t), sizes: []int{n}, nodes: nodes, replicas: replicas, workers: 10, steady: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	r := results[0]
	rr := r.Replicas
	if rr == nil || len(r.Daemon.Latencies) != n || r.Daemon.AllGone <= 0 {
		t.Fatalf("replicas pass incomplete: %+v, daemon %+v", rr, r.Daemon)
	}
	if rr.HolderWrites <= 0 || len(rr.IdleRSS) != replicas || len(rr.PeakRSS) != replicas || rr.IdleRSS[0] <= 0 {
		t.Errorf("lease writes or memory not measured: %+v", rr)
	}
	if rr.Moved < 1 || rr.Failover <= 0 || rr.NotReady != 0 {
		t.Errorf("failover: %d nodes moved in %s, %d seen not Ready; want at least one moved and none not Ready", rr.Moved, rr.Failover, rr.NotReady)
	}
	if !strings.Contains(report(results), fmt.Sprintf("| %d | %d | %d |", replicas, nodes, n)) {
		t.Errorf("report has no replicas row:\n%s", report(results))
	}
}
