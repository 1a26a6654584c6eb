package prober

import (
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/health"
	healthpb "google.golang.org/grpc/health/grpc_health_v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/clock"
	clocktesting "k8s.io/utils/clock/testing"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"
)

var t0 = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// fakeNode records what the prober asks of the node; exec answers with
// results in order (then the last one again).
type fakeNode struct {
	mu      sync.Mutex
	results []Result
	execs   int
	kills   []string
	changes int
	events  []string
}

func (f *fakeNode) exec(ctx context.Context, _, _, _ string, cmd []string, out io.Writer) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	r := f.results[min(f.execs, len(f.results)-1)]
	f.execs++
	fmt.Fprintf(out, "run %d", f.execs)
	if r == Failure {
		return utilexec.CodeExitError{Err: fmt.Errorf("exit 1"), Code: 1}
	}
	return nil
}

func (f *fakeNode) config(c clock.WithTicker) Config {
	return Config{
		Clock: c, Exec: f.exec,
		Kill: func(_ context.Context, _ *corev1.Pod, container string, grace time.Duration) error {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.kills = append(f.kills, fmt.Sprintf("%s %s", container, grace))
			return nil
		},
		Changed: func(*corev1.Pod, corev1.PodStatus) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.changes++
		},
		Event: func(_ *corev1.Pod, _, reason, msg string) {
			f.mu.Lock()
			defer f.mu.Unlock()
			f.events = append(f.events, reason+": "+msg)
		},
	}
}

func (f *fakeNode) counts() (execs, kills, changes int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.execs, len(f.kills), f.changes
}

func probedPod(c corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID("u1")},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{c}, TerminationGracePeriodSeconds: ptr.To[int64](7)},
	}
}

func runningStatus(restarts int32, started time.Time) corev1.PodStatus {
	return corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "127.0.0.1", ContainerStatuses: []corev1.ContainerStatus{{
		Name: "c", ContainerID: "mock://c", RestartCount: restarts, Ready: true, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(started)}},
	}}}
}

func exec(p corev1.Probe) *corev1.Probe {
	p.Exec = &corev1.ExecAction{Command: []string{"check"}}
	return &p
}

// testWorkers sets up a manager holding pod with status, and the workers of
// its container "c" without their goroutines, for the test to step them.
func testWorkers(f *fakeNode, clk clock.WithTicker, pod *corev1.Pod, status corev1.PodStatus) (*Manager, map[Kind]*worker) {
	m := New(f.config(clk))
	pp := &podProbes{pod: pod, status: status, workers: map[probeKey]*worker{}, results: map[probeKey]instanceResult{},
		seen: map[probeKey]bool{}, stopped: make(chan struct{})}
	m.pods["ns/p"] = pp
	ws := map[Kind]*worker{}
	for _, k := range []Kind{Startup, Readiness, Liveness} {
		if p := probeOf(&pod.Spec.Containers[0], k); p != nil {
			w := &worker{m: m, pp: pp, container: &pod.Spec.Containers[0], kind: k, probe: p}
			pp.workers[probeKey{"c", k}] = w
			pp.seen[probeKey{"c", k}] = true
			ws[k] = w
		}
	}
	return m, ws
}

func (m *Manager) resultNow(k Kind) Result {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods["ns/p"]
	for i := range pp.status.ContainerStatuses {
		return pp.resultOf(probeKey{"c", k}, instanceOf(&pp.status.ContainerStatuses[i]))
	}
	return Unknown
}

func TestReadinessThresholds(t *testing.T) {
	f := &fakeNode{results: []Result{Success, Success, Failure, Failure, Success, Failure, Failure, Failure}}
	clk := clocktesting.NewFakeClock(t0)
	pod := probedPod(corev1.Container{Name: "c", ReadinessProbe: exec(corev1.Probe{SuccessThreshold: 2, FailureThreshold: 3})})
	m, ws := testWorkers(f, clk, pod, runningStatus(0, t0))
	want := []Result{Failure, Success, Success, Success, Success, Success, Success, Failure}
	for i, w := range want {
		ws[Readiness].step(context.Background())
		if got := m.resultNow(Readiness); got != w {
			t.Fatalf("after probe %d (%v): result %v, want %v", i+1, f.results[i], got, w)
		}
	}
	if _, kills, changes := f.counts(); kills != 0 || changes != 2 {
		t.Errorf("kills %d, changes %d; want 0 and 2 (ready, then unready)", kills, changes)
	}
}

func TestInitialDelay(t *testing.T) {
	f := &fakeNode{results: []Result{Success}}
	clk := clocktesting.NewFakeClock(t0)
	pod := probedPod(corev1.Container{Name: "c", ReadinessProbe: exec(corev1.Probe{InitialDelaySeconds: 5})})
	m, ws := testWorkers(f, clk, pod, runningStatus(0, t0))
	clk.Step(4 * time.Second)
	ws[Readiness].step(context.Background())
	if execs, _, _ := f.counts(); execs != 0 || m.resultNow(Readiness) != Failure {
		t.Fatalf("probed %d times within initialDelaySeconds", execs)
	}
	clk.Step(time.Second)
	ws[Readiness].step(context.Background())
	if execs, _, _ := f.counts(); execs != 1 || m.resultNow(Readiness) != Success {
		t.Fatalf("after initialDelaySeconds: %d probes, result %v", execs, m.resultNow(Readiness))
	}
}

// TestLivenessKillsOnceAndResumesOnRestart: a liveness failure past the
// threshold stops the container with the probe's grace period, then the
// worker holds until the container's next run, which starts over.
func TestLivenessKillsOnceAndResumesOnRestart(t *testing.T) {
	f := &fakeNode{results: []Result{Failure, Failure, Failure, Success}}
	clk := clocktesting.NewFakeClock(t0)
	pod := probedPod(corev1.Container{Name: "c", LivenessProbe: exec(corev1.Probe{FailureThreshold: 2, TerminationGracePeriodSeconds: ptr.To[int64](3)})})
	m, ws := testWorkers(f, clk, pod, runningStatus(0, t0))
	for range 4 {
		ws[Liveness].step(context.Background())
	}
	if execs, kills, _ := f.counts(); execs != 2 || kills != 1 || f.kills[0] != "c 3s" {
		t.Fatalf("execs %d, kills %v; want 2 probes, one kill with grace 3s", execs, f.kills)
	}
	m.Observe(pod, runningStatus(1, t0.Add(5*time.Second)))
	ws[Liveness].step(context.Background())
	if execs, kills, _ := f.counts(); execs != 3 || kills != 1 || m.resultNow(Liveness) != Success {
		t.Fatalf("after the restart: execs %d, kills %d, result %v", execs, kills, m.resultNow(Liveness))
	}
}

// TestStartupGatesReadiness: readiness is not probed, and the container is
// neither started nor ready, until the startup probe passed.
func TestStartupGatesReadiness(t *testing.T) {
	f := &fakeNode{results: []Result{Failure, Success, Success}}
	clk := clocktesting.NewFakeClock(t0)
	pod := probedPod(corev1.Container{Name: "c", StartupProbe: exec(corev1.Probe{FailureThreshold: 5}), ReadinessProbe: exec(corev1.Probe{})})
	m, ws := testWorkers(f, clk, pod, runningStatus(0, t0))
	ws[Readiness].step(context.Background())
	ws[Startup].step(context.Background())
	if execs, _, _ := f.counts(); execs != 1 {
		t.Fatalf("execs %d: readiness probed before startup passed", execs)
	}
	cs := m.overlayNow().ContainerStatuses[0]
	if *cs.Started || cs.Ready {
		t.Fatalf("before the startup probe passed: started %v ready %v", *cs.Started, cs.Ready)
	}
	ws[Startup].step(context.Background())
	ws[Startup].step(context.Background()) // done for this run: not probed
	ws[Readiness].step(context.Background())
	if execs, _, _ := f.counts(); execs != 3 {
		t.Fatalf("execs %d, want startup twice then readiness once", execs)
	}
	cs = m.overlayNow().ContainerStatuses[0]
	if !*cs.Started || !cs.Ready {
		t.Fatalf("after both passed: started %v ready %v", *cs.Started, cs.Ready)
	}
}

func (m *Manager) overlayNow() corev1.PodStatus {
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods["ns/p"]
	return pp.overlay(pp.status)
}

// TestWorkersTickAndStop runs real workers on a fake clock: one probe per
// period, and every goroutine ends when the pod is forgotten.
func TestWorkersTickAndStop(t *testing.T) {
	f := &fakeNode{results: []Result{Success}}
	clk := clocktesting.NewFakeClock(t0)
	m := New(f.config(clk))
	pod := probedPod(corev1.Container{Name: "c", ReadinessProbe: exec(corev1.Probe{PeriodSeconds: 2})})
	status := m.Observe(pod, runningStatus(0, t0))
	if status.ContainerStatuses[0].Ready {
		t.Fatal("ready before its readiness probe ran")
	}
	waitFor(t, "first probe", func() bool { e, _, _ := f.counts(); return e == 1 })
	for want := 2; want <= 4; want++ {
		waitFor(t, "worker waiting on its ticker", clk.HasWaiters)
		clk.Step(2 * time.Second)
		waitFor(t, fmt.Sprintf("probe %d", want), func() bool { e, _, _ := f.counts(); return e == want })
	}
	if got := m.Observe(pod, runningStatus(0, t0)); !got.ContainerStatuses[0].Ready {
		t.Error("not ready after passing probes")
	}
	m.Forget("ns/p")
	done := make(chan struct{})
	go func() { m.Stop(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("workers did not stop")
	}
}

// TestUnsupportedOncePerPod: a probe that cannot be run is named in one
// Event however often the pod's status changes, and leaves ready alone.
func TestUnsupportedOncePerPod(t *testing.T) {
	f := &fakeNode{results: []Result{Success}}
	m := New(f.config(clocktesting.NewFakeClock(t0)))
	defer m.Stop()
	pod := probedPod(corev1.Container{Name: "c", ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(80)}}}})
	for range 3 {
		if s := m.Observe(pod, runningStatus(0, t0)); !s.ContainerStatuses[0].Ready {
			t.Fatal("an unsupported readiness probe made the container unready")
		}
	}
	if len(f.events) != 1 || !strings.Contains(f.events[0], `readiness probe of container "c"`) {
		t.Fatalf("events %q, want one naming the probe", f.events)
	}
}

// TestNetworkProbes runs HTTP and TCP probes against real listeners.
func TestNetworkProbes(t *testing.T) {
	var gotHeader string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotHeader = r.Header.Get("X-Probe") + "|" + r.Host + "|" + r.UserAgent()
		if r.URL.Path == "/bad" {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(strings.Repeat("x", 3*MaxOutput)))
	}))
	defer srv.Close()
	u, _ := url.Parse(srv.URL)
	port, _ := strconv.Atoi(u.Port())
	m := New(Config{Clock: clock.RealClock{}, PodNetwork: true})
	defer m.Stop()
	c := &corev1.Container{Name: "c", Ports: []corev1.ContainerPort{{Name: "web", ContainerPort: int32(port)}}}
	pod := probedPod(*c)
	pod.Status = runningStatus(0, t0)
	probe := func(h corev1.ProbeHandler) outcome {
		t.Helper()
		out, err := m.run(context.Background(), pod, c, &corev1.Probe{ProbeHandler: h, TimeoutSeconds: 2})
		if err != nil {
			t.Fatal(err)
		}
		return out
	}
	get := func(path string) corev1.ProbeHandler {
		return corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: path, Port: intstr.FromString("web"),
			HTTPHeaders: []corev1.HTTPHeader{{Name: "X-Probe", Value: "1"}, {Name: "Host", Value: "example"}}}}
	}
	if out := probe(get("/ok")); out.result != Success || len(out.output) != MaxOutput {
		t.Errorf("HTTP 200: %v, %d bytes of output (want at most %d)", out.result, len(out.output), MaxOutput)
	}
	if gotHeader != "1|example|kube-probe" {
		t.Errorf("request header|host|agent = %q", gotHeader)
	}
	if out := probe(get("bad")); out.result != Failure {
		t.Errorf("HTTP 503: %v", out.result)
	}
	if out := probe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(port))}}); out.result != Success {
		t.Errorf("TCP to a listener: %v %s", out.result, out.output)
	}
	l, _ := net.Listen("tcp", "127.0.0.1:0")
	closed := l.Addr().(*net.TCPAddr).Port
	_ = l.Close()
	if out := probe(corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(int32(closed))}}); out.result != Failure {
		t.Errorf("TCP to a closed port: %v", out.result)
	}
	if _, err := m.run(context.Background(), pod, c, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Port: intstr.FromString("nope")}}}); err == nil || !strings.Contains(err.Error(), `no port named "nope"`) {
		t.Errorf("unknown named port: %v", err)
	}
}

// TestExecTimeout: a command still running at timeoutSeconds fails the probe.
func TestExecTimeout(t *testing.T) {
	m := New(Config{Clock: clock.RealClock{}, Exec: func(ctx context.Context, _, _, _ string, _ []string, _ io.Writer) error {
		<-ctx.Done()
		return ctx.Err()
	}})
	defer m.Stop()
	c := &corev1.Container{Name: "c"}
	out, err := m.run(context.Background(), probedPod(*c), c, exec(corev1.Probe{TimeoutSeconds: 1}))
	if err != nil || out.result != Failure || !strings.Contains(out.output, "timed out") {
		t.Fatalf("%v %q %v", out.result, out.output, err)
	}
}

func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestGRPCProbe checks a gRPC probe against a real health server: SERVING
// passes, NOT_SERVING fails.
func TestGRPCProbe(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	hs := health.NewServer()
	healthpb.RegisterHealthServer(srv, hs)
	go func() { _ = srv.Serve(l) }()
	defer srv.Stop()
	hs.SetServingStatus("db", healthpb.HealthCheckResponse_NOT_SERVING)

	m := New(Config{Clock: clock.RealClock{}, PodNetwork: true})
	defer m.Stop()
	c := &corev1.Container{Name: "c"}
	pod := probedPod(*c)
	pod.Status = runningStatus(0, t0)
	port := int32(l.Addr().(*net.TCPAddr).Port)
	for service, want := range map[string]Result{"": Success, "db": Failure} {
		out, err := m.run(context.Background(), pod, c, &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
			GRPC: &corev1.GRPCAction{Port: port, Service: ptr.To(service)}}, TimeoutSeconds: 2})
		if err != nil || out.result != want {
			t.Errorf("service %q: %v %q %v, want %v", service, out.result, out.output, err, want)
		}
	}
}
