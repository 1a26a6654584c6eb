// Command bench measures virtual-kubelet against the API server's own floor
// on a local control plane (`make cluster-up` first; `make bench` runs it).
//
// For each N it makes two passes over N pods bound to a node (spec.nodeName
// preset, so the scheduler is not in the path): create them all, wait until
// all are Running as seen through the API server, delete them all
// gracefully, wait until all are gone.
//
//   - floor: no daemon. The bench itself does what any kubelet must: one
//     status write per pod, then on deletion the terminal status and the
//     final delete (grace 0), with many workers and no client rate limit.
//   - kwok (with -kwok, which `make bench` passes): kwok, the simulator,
//     managing as many nodes with its fast stages, as its users run it.
//   - daemon: the virtual-kubelet binary with the mock provider, defaults
//     as shipped.
//
// Every figure of the daemon pass is also given as a ratio to the floor's
// and to kwok's, measured in the same run on the same machine.
//
// With -managed-nodes M the pods are spread over M nodes that kwok and the
// daemon do not register: in each of their passes the bench creates M
// Nodes with kwok's annotation, as Karpenter's kwok provider does, and
// kwok (--manage-nodes-with-annotation-selector) or the daemon (--manage-*
// and --kubelet-listener shared) takes them over (managed.go); the floor
// registers its own as with -nodes.
//
// With -remote-cluster (`make bench-ab`) it measures A→B: the floor pass
// runs on A and on B; the daemon pass runs the daemon in A with the
// kubernetes provider, which puts A's pods in B, where B's scheduler binds
// them to a mock node (B's workers, a second daemon). The times are ratios
// to the sum of A's and B's floors.
//
// With -soak D (`make soak`) it runs no passes but a soak of D: two
// daemons, one node and a 50-node process, in node hosts, under continuous
// pod churn with logs -f, exec and port-forward sessions and metrics API
// reads through the API server, which is restarted during the run. It
// samples each daemon's goroutines, open fds, live heap and RSS and reports
// their trends after a warm-up, the pods stuck and the terminal statuses
// lost (soak.go).
package main

import (
	"context"
	"flag"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/node"
)

func logf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, time.Now().Format("15:04:05 ")+format+"\n", args...)
}

// config is the bench's command line.
type config struct {
	clusterDir string
	// remoteDir, when set, is cluster B: the daemon runs the kubernetes
	// provider in A (clusterDir), putting A's pods in B, where a mock node
	// runs them.
	remoteDir   string
	remoteQPS   float64 // the provider's remote client; 0: its defaults
	remoteBurst int
	sizes       []int
	nodes       int
	// managed: the nodes are Nodes the bench creates, which kwok and the
	// daemon (--manage-*, --kubelet-listener shared) take over (managed.go).
	managed  bool
	replicas int // > 1: the daemon pass is that many --leader-elect replicas
	workers  int
	steady   time.Duration
	binary   string
	kwokDir  string // hack/kwok/build.sh's output; empty: no kwok pass
	plugin   bool   // also run the mock out of process, behind --provider grpc
	outDir   string
	// cpuProfile, with outDir: profile each measured process's CPU over
	// the first cpuProfile of its pods pass.
	cpuProfile time.Duration
	// apiServerProfile, with outDir: profile the API server's CPU over
	// each phase of each pass (phaseprofile.go).
	apiServerProfile bool
	// processProfile, with outDir: profile the daemon's (and the plugin's)
	// CPU over each phase of its pass.
	processProfile bool
	// repeat is how many runs each size gets; the order of the passes
	// alternates from run to run.
	repeat     int
	daemonArgs []string
	daemonEnv  []string
	// soak, with a duration, replaces the passes by the soak (soak.go).
	soak soakConfig
	// compare are more daemon binaries, each given its own daemon pass
	// against the same floor and kwok passes (compare.go).
	compare []namedBinary
}

func main() {
	var c config
	var sizes, extra, compare string
	flag.StringVar(&c.clusterDir, "cluster", filepath.Join(os.TempDir(), "virtual-kubelet", "local"), "directory of a running control plane (make cluster-up)")
	flag.StringVar(&c.remoteDir, "remote-cluster", "", "directory of a second control plane, B: measure A→B, the daemon with --provider kubernetes in -cluster running its pods in B on a mock node")
	flag.Float64Var(&c.remoteQPS, "remote-qps", 0, "with -remote-cluster: remote.qps in the provider config (0: the provider's default)")
	flag.IntVar(&c.remoteBurst, "remote-burst", 0, "with -remote-cluster: remote.burst in the provider config (0: the provider's default)")
	flag.StringVar(&sizes, "n", "1000,5000,10000", "comma-separated pod counts")
	flag.IntVar(&c.nodes, "nodes", 1, "nodes the pods are spread over: the daemon runs them with --node-count, the floor registers as many")
	var managedNodes int
	flag.IntVar(&managedNodes, "managed-nodes", 0, "instead of -nodes: this many Nodes the bench creates (as Karpenter's kwok provider does), which kwok and the daemon (--manage-nodes-with-..., --kubelet-listener shared) manage in their passes; the pods are spread over them")
	flag.IntVar(&c.replicas, "replicas", 1, "daemons sharing the nodes with --leader-elect (more than 1: the pass measures node readiness, lease writes, memory per replica and a failover instead of the single daemon's figures)")
	flag.IntVar(&c.workers, "workers", 50, "the bench's own concurrency (pod creation, the floor's kubelet)")
	flag.DurationVar(&c.steady, "steady", 30*time.Second, "idle window to measure the daemon's steady-state CPU with all pods Running (0: skip)")
	flag.StringVar(&c.binary, "binary", "", "virtual-kubelet binary (default: built from ./cmd/virtual-kubelet)")
	flag.StringVar(&compare, "compare-binaries", "", "more virtual-kubelet binaries as name=path,...: each gets a daemon pass after -binary's, against the same floor and kwok passes, and a row beside it in the report")
	flag.StringVar(&c.kwokDir, "kwok", "", "kwok's directory from hack/kwok/build.sh (bin/kwok, stages.yaml): measure kwok too (not with -remote-cluster)")
	flag.BoolVar(&c.plugin, "plugin", false, "after the daemon pass, run it again with the mock out of process (virtual-kubelet plugin on a unix socket, the daemon with --provider grpc): in-process vs out-of-process")
	flag.StringVar(&c.outDir, "out", "", "directory for the results (results.md, latency-N.svg); empty prints only")
	flag.DurationVar(&c.cpuProfile, "cpu-profile", 0, "with -out: a CPU profile of the daemon (and the plugin) over the first D of each pods pass, cpu-<process>-N.pb.gz (go tool pprof -top)")
	flag.BoolVar(&c.apiServerProfile, "apiserver-profile", false, "with -out: CPU profiles of the API server over each phase of each pass, in 5 s windows, apiserver-cpu-<pass>-<N>-<running|gone>-<i>.pb.gz (go tool pprof -top merges the files given)")
	flag.BoolVar(&c.processProfile, "process-profile", false, "with -out: CPU profiles of the daemon (and the plugin) over each phase of its pass, in 5 s windows, <process>-cpu-<N>-<running|gone>-<i>.pb.gz")
	flag.IntVar(&c.repeat, "repeat", 1, "runs of each size; every second run makes its passes in the reverse order (daemon first), so that a control plane slowing down over a run favours neither, and the report gives each run's ratios and their medians; with -out, run K's files are in run-K/")
	flag.StringVar(&extra, "daemon-args", "", "extra flags for the daemon, space-separated")
	var env string
	flag.StringVar(&env, "daemon-env", "", "extra environment for the daemon only, space-separated K=V (e.g. GOGC=50)")
	flag.DurationVar(&c.soak.duration, "soak", 0, "instead of the passes, a soak of this duration (make soak): two daemons, one node and -soak-nodes nodes, under continuous pod churn, logs -f, exec, port-forward and metrics API reads, with API server restarts; samples each daemon's goroutines, fds, heap and RSS and reports their trends (needs the cluster's node network)")
	flag.IntVar(&c.soak.perMinute, "soak-rate", 1000, "with -soak: pods created a minute over all nodes")
	flag.IntVar(&c.soak.maxInFlight, "soak-in-flight", 500, "with -soak: most pods alive at once (creation waits beyond)")
	flag.IntVar(&c.soak.wideNodes, "soak-nodes", 50, "with -soak: the second daemon's --node-count")
	flag.DurationVar(&c.soak.warmup, "soak-warmup", 10*time.Minute, "with -soak: the values at this time are the baseline of the trends")
	flag.DurationVar(&c.soak.interval, "soak-interval", time.Minute, "with -soak: time between samples")
	flag.DurationVar(&c.soak.bound, "soak-bound", 2*time.Minute, "with -soak: how long a pod may take to reach each expected state (Running, its terminal status, gone) before it counts as stuck")
	flag.IntVar(&c.soak.restarts, "soak-restarts", 2, "with -soak: API server restarts, evenly spread over the run")
	flag.IntVar(&c.soak.streamWorkers, "soak-stream-workers", 2, "with -soak: concurrent sessions of each kind (logs -f, exec, port-forward)")
	flag.StringVar(&c.soak.clusterBinary, "cluster-binary", "bin/cluster", "with -soak: the cluster helper (make build), which restarts the API server")
	flag.Parse()
	if c.soak.duration > 0 {
		c.daemonArgs = strings.Fields(extra)
		if err := validSoak(c.soak); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			os.Exit(2)
		}
		ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
		defer stop()
		if err := runSoak(ctx, c); err != nil {
			fmt.Fprintln(os.Stderr, "bench:", err)
			stop()
			os.Exit(1)
		}
		return
	}
	for _, s := range strings.Split(sizes, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		if err != nil || n < 1 {
			fmt.Fprintf(os.Stderr, "bench: -n: %q is not a pod count\n", s)
			os.Exit(2)
		}
		c.sizes = append(c.sizes, n)
	}
	if c.nodes < 1 {
		fmt.Fprintf(os.Stderr, "bench: -nodes must be at least 1, got %d\n", c.nodes)
		os.Exit(2)
	}
	if managedNodes != 0 {
		if managedNodes < 1 || c.nodes != 1 {
			fmt.Fprintf(os.Stderr, "bench: -managed-nodes must be at least 1 and replaces -nodes, got %d with -nodes %d\n", managedNodes, c.nodes)
			os.Exit(2)
		}
		if c.remoteDir != "" || c.replicas != 1 || c.plugin {
			fmt.Fprintln(os.Stderr, "bench: -managed-nodes measures one daemon on one cluster: not with -remote-cluster, -replicas or -plugin")
			os.Exit(2)
		}
		c.nodes, c.managed = managedNodes, true
	}
	if c.remoteDir != "" && c.nodes != 1 {
		fmt.Fprintf(os.Stderr, "bench: -remote-cluster runs one virtual node; -nodes must be 1, got %d\n", c.nodes)
		os.Exit(2)
	}
	if c.replicas < 1 || c.replicas > 200 {
		fmt.Fprintf(os.Stderr, "bench: -replicas must be from 1 to 200 (each takes a loopback address), got %d\n", c.replicas)
		os.Exit(2)
	}
	if c.replicas > 1 && c.remoteDir != "" {
		fmt.Fprintln(os.Stderr, "bench: -replicas measures one cluster; it does not go with -remote-cluster")
		os.Exit(2)
	}
	if c.plugin && (c.nodes != 1 || c.replicas != 1 || c.remoteDir != "") {
		fmt.Fprintln(os.Stderr, "bench: -plugin measures one node of one daemon on one cluster: not with -nodes, -replicas or -remote-cluster")
		os.Exit(2)
	}
	if c.remoteDir != "" && c.kwokDir != "" {
		fmt.Fprintln(os.Stderr, "bench: -kwok measures one cluster; it does not go with -remote-cluster")
		os.Exit(2)
	}
	if c.cpuProfile > 0 && c.processProfile {
		fmt.Fprintln(os.Stderr, "bench: -cpu-profile and -process-profile both profile the daemon's CPU, and a Go process takes one CPU profile at a time: give one")
		os.Exit(2)
	}
	if c.repeat < 1 {
		fmt.Fprintf(os.Stderr, "bench: -repeat must be at least 1, got %d\n", c.repeat)
		os.Exit(2)
	}
	if c.remoteQPS < 0 || c.remoteBurst < 0 {
		fmt.Fprintf(os.Stderr, "bench: -remote-qps and -remote-burst must not be negative, got %v and %d\n", c.remoteQPS, c.remoteBurst)
		os.Exit(2)
	}
	var err error
	if c.compare, err = parseBinaries(compare); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(2)
	}
	if len(c.compare) > 0 && (c.replicas > 1 || c.remoteDir != "") {
		fmt.Fprintln(os.Stderr, "bench: -compare-binaries compares one daemon on one cluster: not with -replicas or -remote-cluster")
		os.Exit(2)
	}
	c.daemonArgs = strings.Fields(extra)
	c.daemonEnv = strings.Fields(env)
	if _, err := run(context.Background(), c); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}

// result is one N's outcome.
type result struct {
	N     int
	Nodes int
	// Managed: the nodes are Nodes the bench created (-managed-nodes).
	Managed bool
	// Run is the run's number with -repeat, else 0; DaemonFirst says its
	// passes went in the reverse order.
	Run         int
	DaemonFirst bool
	IdleCPU     float64 // fraction of a core, with the nodes up and no pods
	Floor       *phaseResult
	// FloorB is cluster B's floor in A→B mode, else nil.
	FloorB *phaseResult
	// Kwok is kwok's pass, nil without -kwok.
	Kwok *kwokResult
	// Replicas is the replicas pass (-replicas > 1), whose pods' figures
	// are in Daemon; else nil.
	Replicas *replicasResult
	// Plugin is the out-of-process pass (-plugin); else nil.
	Plugin *pluginResult
	Daemon *phaseResult
	// Compared are the daemon passes of -compare-binaries.
	Compared []comparedPass
	// NodesReady is from the daemon's start to all its nodes Ready.
	NodesReady time.Duration
	Usage      processUsage
	SteadyCPU  float64 // fraction of a core
	// BenchCPU is the bench process's own CPU time in each pass. The
	// passes create, watch and delete the same pods; the floor pass also
	// writes every status and final delete, so the difference is what the
	// floor's kubelet work cost. (Not in A→B mode, where the daemon pass
	// also watches B's pods.)
	BenchCPU struct{ Floor, Daemon time.Duration }
	IdleRSS  int64 // bytes, with the node up and no pods: mostly the binary's mapped pages
	APICalls map[string]float64
	Client   clientStats // the daemon's requests to its own cluster
	Queues   []queueStats
	// ProviderCalls counts the daemon's calls into its provider by
	// "Method result".
	ProviderCalls map[string]float64
	Remote        *remoteResult // A→B mode only
}

// cluster is a running control plane the bench drives.
type cluster struct {
	info   *controlplane.Info
	client kubernetes.Interface
	host   string // the API server's host:port, as client metrics label it
}

func openCluster(dir string) (*cluster, error) {
	info, err := controlplane.LoadInfo(dir)
	if err != nil {
		return nil, fmt.Errorf("no control plane in %s (run make cluster-up): %w", dir, err)
	}
	restCfg, err := info.RESTConfig()
	if err != nil {
		return nil, err
	}
	restCfg.QPS = -1 // the bench measures the API server, not a client limiter
	client, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, err
	}
	u, err := url.Parse(restCfg.Host)
	if err != nil {
		return nil, fmt.Errorf("control plane in %s: server %q: %w", dir, restCfg.Host, err)
	}
	return &cluster{info: info, client: client, host: u.Host}, nil
}

func run(ctx context.Context, c config) ([]*result, error) {
	a, err := openCluster(c.clusterDir)
	if err != nil {
		return nil, err
	}
	var b *cluster
	if c.remoteDir != "" {
		if b, err = openCluster(c.remoteDir); err != nil {
			return nil, err
		}
	}
	removeBinary, err := ensureBinary(&c)
	if err != nil {
		return nil, err
	}
	defer removeBinary()

	var results []*result
	runs := max(1, c.repeat)
	for _, n := range c.sizes {
		for i := range runs {
			rc := c
			if runs > 1 && c.outDir != "" {
				rc.outDir = filepath.Join(c.outDir, fmt.Sprintf("run-%d", i+1))
			}
			if rc.outDir != "" {
				if err := os.MkdirAll(rc.outDir, 0o755); err != nil {
					return nil, err
				}
			}
			r, err := runSize(ctx, rc, a, b, n, i%2 == 1)
			if err != nil {
				return nil, fmt.Errorf("at N=%d: %w", n, err)
			}
			if runs > 1 {
				r.Run = i + 1
			}
			results = append(results, r)
			fmt.Println(report([]*result{r}))
			if err := writeLatencyPlot(rc.outDir, r); err != nil {
				return nil, err
			}
		}
	}
	text := report(results)
	if c.outDir != "" {
		if err := os.WriteFile(filepath.Join(c.outDir, "results.md"), []byte(text), 0o644); err != nil {
			return nil, err
		}
		logf("results in %s", c.outDir)
	}
	return results, nil
}

// ensureBinary builds the daemon into a temporary directory when -binary
// names none; remove deletes it.
func ensureBinary(c *config) (remove func(), err error) {
	if c.binary != "" {
		return func() {}, nil
	}
	dir, err := os.MkdirTemp("", "vk-bench-")
	if err != nil {
		return nil, err
	}
	c.binary = filepath.Join(dir, "virtual-kubelet")
	logf("building %s", c.binary)
	build := exec.Command("go", "build", "-o", c.binary, "github.com/vkubelet/virtual-kubelet/cmd/virtual-kubelet")
	// Static, as the image's and as kwok's (make bench).
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("building virtual-kubelet: %w", err)
	}
	return func() { os.RemoveAll(dir) }, nil
}

// writeLatencyPlot writes r's latency plot to dir as latency-N.svg; with
// no dir, nothing.
func writeLatencyPlot(dir string, r *result) error {
	if dir == "" {
		return nil
	}
	return os.WriteFile(filepath.Join(dir, fmt.Sprintf("latency-%d.svg", r.N)), []byte(latencyPlot(r)), 0o644)
}

// floorPass is the floor on one cluster: its nodes registered by the node
// library, the bench as their kubelet. It returns the pass and the bench's
// CPU in it.
func floorPass(ctx context.Context, c config, client kubernetes.Interface, label string, n, nodes int) (*phaseResult, time.Duration, error) {
	logf("N=%d %s: the bench writes what a kubelet must", n, label)
	floorNodes := nodeNames(fmt.Sprintf("bench-floor-%d", n), nodes)
	stopNodes, err := floorNodesUp(ctx, client, floorNodes)
	if err != nil {
		return nil, 0, err
	}
	ns, err := namespace(ctx, client, fmt.Sprintf("bench-floor-%d", n))
	if err != nil {
		stopNodes()
		return nil, 0, err
	}
	ft := newTracker(n)
	fctx, stopFloor := context.WithCancel(ctx)
	newFloorKubelet(fctx, client, ns, c.workers, ft)
	cpuBefore := selfCPU()
	res, err := runPass(fctx, client, ns, floorNodes, n, c.workers, ft, passHooks{phase: apiServerProfiler(c, client, label, n)})
	cpu := selfCPU() - cpuBefore
	stopFloor()
	stopNodes()
	cleanup(client, ns, floorNodes)
	if err != nil {
		return nil, 0, fmt.Errorf("%s: %w", label, err)
	}
	logf("N=%d %s: all Running in %s, all gone in %s", n, label, res.AllRunning.Round(time.Millisecond), res.AllGone.Round(time.Millisecond))
	return res, cpu, nil
}

// runSize measures n pods: the floor on A (and on B in A→B mode), kwok,
// then the daemon; or in the reverse order when daemonFirst.
func runSize(ctx context.Context, c config, a, b *cluster, n int, daemonFirst bool) (*result, error) {
	r := &result{N: n, Nodes: max(1, c.nodes), Managed: c.managed, DaemonFirst: daemonFirst}
	timeout := 10*time.Minute + time.Duration(n)*100*time.Millisecond
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	passes := []func() error{
		func() error { return floorPasses(ctx, c, a, b, r) },
		func() error {
			if c.kwokDir == "" {
				return nil
			}
			var err error
			r.Kwok, err = kwokPass(ctx, c, a, n, r.Nodes)
			return err
		},
		func() error { return daemonPass(ctx, c, a, b, r) },
	}
	passes = append(passes, comparedPasses(ctx, c, a, b, r)...)
	if daemonFirst {
		slices.Reverse(passes)
	}
	for _, pass := range passes {
		if err := pass(); err != nil {
			return nil, err
		}
	}
	if r.Replicas == nil {
		fr, fg := r.floor()
		logf("N=%d daemon: all Running in %s (%.2fx), all gone in %s (%.2fx)", n,
			r.Daemon.AllRunning.Round(time.Millisecond), ratio(r.Daemon.AllRunning, fr),
			r.Daemon.AllGone.Round(time.Millisecond), ratio(r.Daemon.AllGone, fg))
	}
	return r, nil
}

// floorPasses is the floor on A, and on B in A→B mode.
func floorPasses(ctx context.Context, c config, a, b *cluster, r *result) error {
	var err error
	if b == nil {
		r.Floor, r.BenchCPU.Floor, err = floorPass(ctx, c, a.client, "floor", r.N, r.Nodes)
		return err
	}
	if r.Floor, r.BenchCPU.Floor, err = floorPass(ctx, c, a.client, "floor A", r.N, r.Nodes); err != nil {
		return err
	}
	r.FloorB, _, err = floorPass(ctx, c, b.client, "floor B", r.N, r.Nodes)
	return err
}

// daemonPass is the daemon's pass over r.N pods (the replicas' with
// -replicas), and the out-of-process pass after it with -plugin.
func daemonPass(ctx context.Context, c config, a, b *cluster, r *result) error {
	n := r.N
	var err error
	if c.replicas > 1 {
		r.Replicas, r.Daemon, err = replicasPass(ctx, c, a, n, r.Nodes)
		return err
	}
	prefix := fmt.Sprintf("bench-vk-%d", n)
	vkNodes := nodeNames(prefix, r.Nodes)
	spec := daemonSpec{name: prefix, nodes: r.Nodes, kubeconfig: a.info.Kubeconfig, provider: []string{"--provider", "mock"}, measured: true}
	if c.managed {
		if spec, err = managedDaemon(ctx, a.client, spec, vkNodes); err != nil {
			return err
		}
		defer cleanup(a.client, "", vkNodes)
	}
	var remote *remoteSide
	if b != nil {
		if remote, err = startRemote(ctx, c, b, n); err != nil {
			return err
		}
		defer remote.stop()
		spec.provider = []string{"--provider", "kubernetes", "--provider-config", remote.configPath}
	}
	started := time.Now()
	d, err := startDaemon(ctx, c, spec)
	if err != nil {
		return err
	}
	defer d.stop()
	for _, name := range vkNodes {
		if err := waitNodeReady(ctx, a.client, name); err != nil {
			return fmt.Errorf("daemon: node %s: %w (log: %s)", name, err, d.logPath)
		}
	}
	r.NodesReady = time.Since(started)
	ns, err := namespace(ctx, a.client, fmt.Sprintf("bench-vk-%d", n))
	if err != nil {
		return err
	}
	callsBefore, err := apiServerPodCalls(ctx, a.client)
	if err != nil {
		return err
	}
	if c.steady > 0 {
		// What idle nodes cost: lease renewals and status updates.
		before := d.usage()
		time.Sleep(c.steady)
		r.IdleCPU = (d.usage().CPU - before.CPU).Seconds() / c.steady.Seconds()
	}
	usageBefore := d.usage()
	r.IdleRSS = usageBefore.PeakRSS
	remote.passStarts()
	var steadyCPU, steadyBench time.Duration
	steady := func() {
		if c.steady <= 0 {
			return
		}
		logf("N=%d daemon: all Running; measuring %s of steady state", n, c.steady)
		time.Sleep(5 * time.Second) // let the last status writes settle
		before, benchBefore := d.usage(), selfCPU()
		remote.steadyStarts()
		time.Sleep(c.steady)
		after := d.usage()
		remote.steadyEnds()
		r.SteadyCPU = (after.CPU - before.CPU).Seconds() / c.steady.Seconds()
		// The idle window is not pod work: keep it out of the per-pod figures.
		steadyCPU += after.CPU - before.CPU
		steadyBench += selfCPU() - benchBefore
		if c.outDir != "" {
			// What holds the memory with all N pods Running, after a GC (what is
			// live, not what the last burst left): go tool pprof -sample_index=inuse_space.
			path := filepath.Join(c.outDir, fmt.Sprintf("heap-%d.pb.gz", n))
			if err := d.saveProfile(ctx, "heap?gc=1", path); err != nil {
				logf("heap profile: %v", err)
			}
		}
	}
	cpuBefore := selfCPU()
	profiled := d.profileCPU(ctx, c, fmt.Sprintf("daemon-%d", n))
	phase := allPhases(apiServerProfiler(c, a.client, "daemon", n), d.phaseProfiler(c, "daemon", n))
	r.Daemon, err = runPass(ctx, a.client, ns, vkNodes, n, c.workers, newTracker(n), passHooks{afterRunning: steady, phase: phase})
	profiled()
	r.BenchCPU.Daemon = selfCPU() - cpuBefore - steadyBench
	if err != nil {
		cleanup(a.client, ns, vkNodes)
		return fmt.Errorf("daemon: %w (log: %s)", err, d.logPath)
	}
	after := d.usage()
	r.Usage = processUsage{CPU: after.CPU - usageBefore.CPU - steadyCPU, PeakRSS: after.PeakRSS}
	callsAfter, _ := apiServerPodCalls(ctx, a.client)
	r.APICalls = diff(callsAfter, callsBefore)
	hosts := []string{a.host}
	if b != nil {
		hosts = append(hosts, b.host)
	}
	stats := d.metrics(ctx, hosts...)
	r.Client, r.Queues, r.ProviderCalls = stats.Clients[0], stats.Queues, stats.ProviderCalls
	if remote != nil {
		r.Remote = remote.passEnds(ctx, r.Daemon, stats.Clients[1])
	}
	d.stop()
	cleanup(a.client, ns, vkNodes)
	if c.plugin {
		if r.Plugin, err = pluginPass(ctx, c, a, n); err != nil {
			return err
		}
	}
	return nil
}

// nodeNames are the names of count nodes: prefix alone for one, else
// prefix-0 ... as the daemon's --node-count names them.
func nodeNames(prefix string, count int) []string {
	if count == 1 {
		return []string{prefix}
	}
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return names
}

// floorNodesUp registers the floor's nodes with the node library's own
// controller, leases included, so the control plane treats them as healthy.
func floorNodesUp(ctx context.Context, client kubernetes.Interface, names []string) (func(), error) {
	ctx, cancel := context.WithCancel(ctx)
	var controllers []*node.NodeController
	stop := func() {
		cancel()
		for _, nc := range controllers {
			<-nc.Done()
		}
	}
	for _, name := range names {
		spec := &corev1.Node{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Bench",
			}}},
		}
		nc, err := node.NewNodeController(node.NaiveNodeProvider{}, spec, client.CoreV1().Nodes(),
			node.WithNodeEnableLeaseV1(client.CoordinationV1().Leases(corev1.NamespaceNodeLease), 0))
		if err != nil {
			stop()
			return nil, err
		}
		controllers = append(controllers, nc)
		go func() { _ = nc.Run(ctx) }()
	}
	for _, nc := range controllers {
		select {
		case <-nc.Ready():
		case <-nc.Done():
			stop()
			return nil, nc.Err()
		}
	}
	return stop, nil
}

// namespace makes a fresh namespace, first clearing what an earlier,
// interrupted run left: its pods are force-deleted, since no kubelet is left
// to finish their deletion.
func namespace(ctx context.Context, client kubernetes.Interface, name string) (string, error) {
	if pods, err := client.CoreV1().Pods(name).List(ctx, metav1.ListOptions{}); err == nil && len(pods.Items) > 0 {
		logf("force-deleting %d pods left in %s", len(pods.Items), name)
		_ = parallel(ctx, len(pods.Items), 50, func(i int) error {
			_ = client.CoreV1().Pods(name).Delete(ctx, pods.Items[i].Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
			return nil
		})
	}
	_ = client.CoreV1().Namespaces().Delete(ctx, name, metav1.DeleteOptions{})
	err := wait.PollUntilContextTimeout(ctx, 500*time.Millisecond, 5*time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
		return err == nil, nil
	})
	if err != nil {
		return "", fmt.Errorf("creating namespace %s: %w", name, err)
	}
	// Pods need the namespace's default ServiceAccount.
	err = wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		_, err := client.CoreV1().ServiceAccounts(name).Get(ctx, "default", metav1.GetOptions{})
		return err == nil, nil
	})
	return name, err
}

func cleanup(client kubernetes.Interface, ns string, nodes []string) {
	ctx := context.Background()
	if ns != "" {
		_ = client.CoreV1().Namespaces().Delete(ctx, ns, metav1.DeleteOptions{})
	}
	_ = parallel(ctx, len(nodes), 50, func(i int) error {
		_ = client.CoreV1().Nodes().Delete(ctx, nodes[i], metav1.DeleteOptions{})
		return nil
	})
}

func waitNodeReady(ctx context.Context, client kubernetes.Interface, name string) error {
	return wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, nil
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady && c.Status == corev1.ConditionTrue {
				return true, nil
			}
		}
		return false, nil
	})
}

func ratio(a, b time.Duration) float64 {
	if b <= 0 {
		return 0
	}
	return float64(a) / float64(b)
}

func diff(after, before map[string]float64) map[string]float64 {
	out := map[string]float64{}
	for k, v := range after {
		out[k] = v - before[k]
	}
	return out
}

// selfCPU is the CPU time this process has used, user and system.
func selfCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// perThousand is d per 1,000 of n pods, in seconds.
func perThousand(d time.Duration, n int) float64 { return d.Seconds() * 1000 / float64(n) }

// floor is what the daemon's times are ratios to: the floor's all Running
// and all gone, in A→B mode the sums of A's and B's floors, as a pod's way
// goes through both clusters.
func (r *result) floor() (running, gone time.Duration) {
	running, gone = r.Floor.AllRunning, r.Floor.AllGone
	if r.FloorB != nil {
		running += r.FloorB.AllRunning
		gone += r.FloorB.AllGone
	}
	return running, gone
}

// floorCPU is the CPU the floor's kubelet work cost: the bench's CPU in the
// floor pass less what the same pod traffic cost it in the daemon pass.
func (r *result) floorCPU() time.Duration { return max(r.BenchCPU.Floor-r.BenchCPU.Daemon, 0) }
