package main

import (
	"bufio"
	"cmp"
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	"k8s.io/client-go/kubernetes"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
)

// benchDaemon is the virtual-kubelet under measurement.
type benchDaemon struct {
	*childproc.Process
	metricsAddr string
	logPath     string
}

// freeAddr is a free port on the loopback address ip, as host:port.
func freeAddr(ip string) (string, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(ip, "0"))
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}

// freePorts finds count consecutive free ports on the loopback address ip,
// for the kubelet APIs of --node-count nodes, and returns the first. They
// are below Linux's default ephemeral range (32768 up), where the kernel
// would hand them to outgoing connections, or to freeAddr, meanwhile.
func freePorts(ip string, count int) (int, error) {
	const low, high = 20000, 32768
	if count > high-low {
		return 0, fmt.Errorf("%d consecutive ports do not fit below the ephemeral range", count)
	}
	for range 50 {
		base := low + rand.IntN(high-low-count+1)
		free := true
		for p := base; p < base+count && free; p++ {
			l, err := net.Listen("tcp", net.JoinHostPort(ip, strconv.Itoa(p)))
			if err != nil {
				free = false
				continue
			}
			l.Close()
		}
		if free {
			return base, nil
		}
	}
	return 0, fmt.Errorf("no %d consecutive free ports on loopback", count)
}

// daemonSpec is one daemon the bench starts: its nodes and provider.
type daemonSpec struct {
	name       string // node name (the prefix with more than one node)
	nodes      int
	kubeconfig string
	// provider is the --provider flag and its arguments.
	provider []string
	// measured: the daemon under measurement gets --shared-pod-watch, the
	// bench's -daemon-args and -daemon-env; B's workers run with defaults.
	measured bool
	// ip is the loopback address it listens on and gives as its node IP
	// (replicas of one node set each take their own); empty: 127.0.0.1.
	ip string
	// extra are more flags, before -daemon-args.
	extra []string
	// logLevel is --log-level; empty: warn.
	logLevel string
	// host, when set, is the node host (network namespace) the daemon runs
	// in, at the host's address: the API server proxies logs, exec and
	// port-forward to it, which it refuses to loopback.
	host *nethost.Host
}

// startDaemon runs the binary on loopback (or in its node host) with its
// defaults, plus the metrics endpoint (and pprof) the bench reads. Loopback
// is enough for the bench passes: they never ask an API server to proxy to
// the node (no logs or exec); the soak does, and gives a host.
func startDaemon(ctx context.Context, c config, s daemonSpec) (*benchDaemon, error) {
	ip := cmp.Or(s.ip, "127.0.0.1")
	// A node host's ports are its own: the kubelet's usual one is free.
	port := 10250
	if s.host != nil {
		ip = s.host.Addr.String()
	} else {
		// The metrics port follows the kubelet APIs': one picked apart could
		// land in their range before the daemon takes it.
		var err error
		if port, err = freePorts(ip, s.nodes+1); err != nil {
			return nil, err
		}
	}
	metricsAddr := net.JoinHostPort(ip, strconv.Itoa(port+s.nodes))
	args := append(append([]string{}, s.provider...),
		"--nodename", s.name, "--kubeconfig", s.kubeconfig,
		"--node-count", strconv.Itoa(s.nodes),
		"--node-ip", ip, "--listen-address", ip, "--listen-port", strconv.Itoa(port),
		"--metrics-addr", metricsAddr, "--log-level", cmp.Or(s.logLevel, "warn"),
	)
	if s.host == nil {
		// pprof only on loopback, which a node host's metrics address is not.
		args = append(args, "--enable-profiling")
	}
	args = append(args, s.extra...)
	env := os.Environ()
	if s.measured {
		// One watch of all bound pods, as the daemon is run for a node with
		// thousands of pods: the API server cuts a watch on one node's pods
		// off under such bursts (BENCHMARKS.md, "Defaults the figures chose").
		args = append(args, "--shared-pod-watch")
		args = append(args, c.daemonArgs...)
		env = append(env, c.daemonEnv...)
	}
	cmd := exec.CommandContext(ctx, c.binary, args...)
	if s.host != nil {
		// ip netns exec execs the binary: the pid stays the daemon's.
		cmd = s.host.Command(ctx, c.binary, args...)
	}
	cmd.Env = env
	d, err := startLogged(cmd, s.name+"@"+ip)
	if err != nil {
		return nil, err
	}
	d.metricsAddr = metricsAddr
	logf("daemon %s: pid %d, metrics and pprof at http://%s, log %s", s.name, cmd.Process.Pid, metricsAddr, d.logPath)
	return d, nil
}

// startLogged starts cmd with its output in the file name.log in the
// temporary directory.
func startLogged(cmd *exec.Cmd, name string) (*benchDaemon, error) {
	logPath := filepath.Join(os.TempDir(), name+".log")
	logFile, err := os.Create(logPath)
	if err != nil {
		return nil, err
	}
	cmd.Stdout, cmd.Stderr = logFile, logFile
	p, err := childproc.Start(cmd)
	logFile.Close() // the process has its own copy
	if err != nil {
		return nil, fmt.Errorf("starting %s: %w", cmd.Path, err)
	}
	return &benchDaemon{Process: p, logPath: logPath}, nil
}

func (d *benchDaemon) stop() { d.Stop(20 * time.Second) }

// profile gets the daemon's pprof profile of the given name.
func (d *benchDaemon) profile(ctx context.Context, name string) ([]byte, error) {
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.metricsAddr+"/debug/pprof/"+name, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return nil, fmt.Errorf("GET /debug/pprof/%s: %s", name, resp.Status)
	}
	return io.ReadAll(resp.Body)
}

// saveProfile writes the daemon's pprof profile of the given name to path.
func (d *benchDaemon) saveProfile(ctx context.Context, name, path string) error {
	raw, err := d.profile(ctx, name)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	return os.WriteFile(path, raw, 0o644)
}

// phaseProfiler returns passHooks.phase profiling the process's CPU over
// each phase of its pass of n pods, <name>-cpu-<n>-<phase>-<i>.pb.gz, when
// -process-profile and -out are given; nil otherwise.
func (d *benchDaemon) phaseProfiler(c config, name string, n int) phaseFunc {
	if !c.processProfile || c.outDir == "" {
		return nil
	}
	return phaseProfiler(c.outDir, fmt.Sprintf("%s-cpu-%d", name, n), func(ctx context.Context, seconds int) ([]byte, error) {
		return d.profile(ctx, fmt.Sprintf("profile?seconds=%d", seconds))
	})
}

// profileCPU starts a CPU profile of the process over c.cpuProfile, saved
// as cpu-name.pb.gz in c.outDir; the returned func waits for it. Without
// -cpu-profile and -out it does nothing.
func (d *benchDaemon) profileCPU(ctx context.Context, c config, name string) (wait func()) {
	if c.cpuProfile <= 0 || c.outDir == "" {
		return func() {}
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		path := filepath.Join(c.outDir, "cpu-"+name+".pb.gz")
		if err := d.saveProfile(ctx, fmt.Sprintf("profile?seconds=%d", int(c.cpuProfile.Seconds())), path); err != nil {
			logf("CPU profile of %s: %v", name, err)
		}
	}()
	return func() { <-done }
}

// processUsage is CPU time used and resident memory.
type processUsage struct {
	CPU     time.Duration
	PeakRSS int64 // bytes
	RSS     int64 // bytes, now
}

// usage reads the process's CPU time, RSS and peak RSS from /proc.
func (d *benchDaemon) usage() processUsage {
	var u processUsage
	pid := d.Cmd.Process.Pid
	if stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		_, u.CPU, _ = parseStat(string(stat))
	}
	if f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid)); err == nil {
		defer f.Close()
		sc := bufio.NewScanner(f)
		kib := func(v string) int64 {
			kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
			return kb * 1024
		}
		for sc.Scan() {
			if v, ok := strings.CutPrefix(sc.Text(), "VmHWM:"); ok {
				u.PeakRSS = kib(v)
			} else if v, ok := strings.CutPrefix(sc.Text(), "VmRSS:"); ok {
				u.RSS = kib(v)
			}
		}
	}
	return u
}

// queueStats explains where a queue's time went.
type queueStats struct {
	Name                 string
	Adds, Retries        float64
	MeanWait, MeanWork   time.Duration
	WaitCount, WorkCount float64
}

func parseMetrics(r io.Reader) (map[string]*promFamily, error) {
	p := expfmt.NewTextParser(model.UTF8Validation)
	fams, err := p.TextToMetricFamilies(r)
	if err != nil {
		return nil, err
	}
	out := map[string]*promFamily{}
	for name, f := range fams {
		out[name] = &promFamily{f}
	}
	return out, nil
}

// clientStats is the daemon's API client traffic to one API server.
type clientStats struct {
	Requests map[string]float64 // by "METHOD code"
	// LimiterWait is the time the requests spent in client-go's rate
	// limiter, summed over requests.
	LimiterWait time.Duration
}

// daemonStats is what the daemon's /metrics said after a pass.
type daemonStats struct {
	// Clients are its requests to the API server at each host asked for.
	Clients []clientStats
	Queues  []queueStats
	// ProviderCalls counts calls into the provider by "Method result".
	ProviderCalls map[string]float64
}

// metrics reads, for the API server at each host (host:port), the daemon's
// client requests to it (by method and code) and their rate-limiter wait;
// and the daemon's queues' statistics and provider calls.
func (d *benchDaemon) metrics(ctx context.Context, hosts ...string) daemonStats {
	clients := make([]clientStats, len(hosts))
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, "http://"+d.metricsAddr+"/metrics", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return daemonStats{Clients: clients}
	}
	defer resp.Body.Close()
	fams, err := parseMetrics(resp.Body)
	if err != nil {
		return daemonStats{Clients: clients}
	}
	for i, host := range hosts {
		sel := map[string]string{"host": host}
		clients[i] = clientStats{
			Requests:    fams["rest_client_requests_total"].sumBy(sel, "method", "code"),
			LimiterWait: time.Duration(fams["rest_client_rate_limiter_duration_seconds"].histSum(sel) * float64(time.Second)),
		}
	}
	var queues []queueStats
	for _, q := range []string{"syncPodsFromKubernetes", "syncPodStatusFromProvider", "deletePodsFromKubernetes"} {
		sel := map[string]string{"name": q}
		s := queueStats{
			Name:      q,
			Adds:      fams["workqueue_adds_total"].value(sel),
			Retries:   fams["workqueue_retries_total"].value(sel),
			WaitCount: fams["workqueue_queue_duration_seconds"].histCount(sel),
			WorkCount: fams["workqueue_work_duration_seconds"].histCount(sel),
		}
		if s.WaitCount > 0 {
			s.MeanWait = time.Duration(fams["workqueue_queue_duration_seconds"].histSum(sel) / s.WaitCount * float64(time.Second))
		}
		if s.WorkCount > 0 {
			s.MeanWork = time.Duration(fams["workqueue_work_duration_seconds"].histSum(sel) / s.WorkCount * float64(time.Second))
		}
		queues = append(queues, s)
	}
	calls := fams["virtual_kubelet_provider_call_duration_seconds"].sumBy(nil, "method", "result")
	return daemonStats{Clients: clients, Queues: queues, ProviderCalls: calls}
}

// apiServerPodCalls reads the API server's request counters for pods, by
// verb (LIST, GET, WATCH, PATCH, ...).
func apiServerPodCalls(ctx context.Context, client kubernetes.Interface) (map[string]float64, error) {
	raw, err := client.CoreV1().RESTClient().Get().AbsPath("/metrics").DoRaw(ctx)
	if err != nil {
		return nil, fmt.Errorf("reading the API server's metrics: %w", err)
	}
	fams, err := parseMetrics(strings.NewReader(string(raw)))
	if err != nil {
		return nil, err
	}
	out := map[string]float64{}
	// The API server gives a watch of one node's pods a 10-event buffer and
	// closes it when the buffer stays full; the informer then watches again
	// from where it was (a WATCH, not a LIST).
	if f := fams["apiserver_terminated_watchers_total"]; f != nil {
		out["terminated WATCH"] = f.value(map[string]string{"resource": "pods"})
	}
	f := fams["apiserver_request_total"]
	if f == nil {
		return out, nil
	}
	for _, m := range f.GetMetric() {
		l := labels(m.GetLabel())
		if l["resource"] == "pods" && l["subresource"] == "" {
			out[l["verb"]] += m.GetCounter().GetValue()
		}
		if l["resource"] == "pods" && l["subresource"] == "status" {
			out["status "+l["verb"]] += m.GetCounter().GetValue()
		}
	}
	return out, nil
}
