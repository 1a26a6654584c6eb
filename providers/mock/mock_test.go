package mock

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"math"
	"net/http/httptest"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilexec "k8s.io/utils/exec"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/provider"
)

func newProvider(t *testing.T) (*Provider, *recorder) {
	t.Helper()
	p, err := New(context.Background(), provider.InitConfig{NodeName: "vk0", OperatingSystem: "linux", InternalIP: "10.213.0.2", DaemonPort: 10250, ClusterDomain: "cluster.local"})
	if err != nil {
		t.Fatal(err)
	}
	r := &recorder{}
	p.(*Provider).NotifyPods(context.Background(), r.record)
	return p.(*Provider), r
}

// recorder keeps every status the provider reports.
type recorder struct {
	mu   sync.Mutex
	pods []*corev1.Pod
}

func (r *recorder) record(p *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.pods = append(r.pods, p.DeepCopy())
}

func (r *recorder) last() *corev1.Pod {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.pods[len(r.pods)-1]
}

func (r *recorder) waitFor(t *testing.T, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for time.Now().Before(deadline) {
		if p := r.last(); cond(p) {
			return p
		}
		time.Sleep(5 * time.Millisecond)
	}
	t.Fatalf("%s: last status %+v", what, r.last().Status)
	return nil
}

func testPod(name string, annotations map[string]string, policy corev1.RestartPolicy) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name), Annotations: annotations},
		Spec: corev1.PodSpec{
			RestartPolicy: policy,
			Containers: []corev1.Container{{
				Name: "app", Image: "busybox",
				Env:   []corev1.EnvVar{{Name: "GREETING", Value: "hi"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			}},
		},
	}
}

func TestRunningPod(t *testing.T) {
	p, r := newProvider(t)
	if err := p.CreatePod(context.Background(), testPod("web", nil, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	pod := r.last()
	if pod.Status.Phase != corev1.PodRunning || pod.Status.PodIP == "" || pod.Status.HostIP != "10.213.0.2" {
		t.Fatalf("status %+v", pod.Status)
	}
	cs := pod.Status.ContainerStatuses[0]
	if !cs.Ready || cs.State.Running == nil || cs.ContainerID == "" {
		t.Fatalf("container %+v", cs)
	}
	if err := p.DeletePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	final := r.last()
	if final.Status.Phase != corev1.PodSucceeded || final.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Fatalf("after delete: %+v", final.Status)
	}
	if _, err := p.GetPod(context.Background(), "ns", "web"); !errdefs.IsNotFound(err) {
		t.Errorf("deleted pod still there: %v", err)
	}
	if err := p.DeletePod(context.Background(), pod); !errdefs.IsNotFound(err) {
		t.Errorf("second delete: %v", err)
	}
}

func TestScriptedExitAndRestarts(t *testing.T) {
	cases := []struct {
		policy   corev1.RestartPolicy
		code     string
		phase    corev1.PodPhase
		restarts bool
	}{
		{corev1.RestartPolicyNever, "0", corev1.PodSucceeded, false},
		{corev1.RestartPolicyNever, "3", corev1.PodFailed, false},
		{corev1.RestartPolicyOnFailure, "0", corev1.PodSucceeded, false},
		{corev1.RestartPolicyOnFailure, "2", corev1.PodRunning, true},
		{corev1.RestartPolicyAlways, "0", corev1.PodRunning, true},
	}
	for _, c := range cases {
		t.Run(string(c.policy)+"-"+c.code, func(t *testing.T) {
			p, r := newProvider(t)
			pod := testPod("job", map[string]string{AnnotationRunFor: "20ms", AnnotationExitCode: c.code, AnnotationRestartDelay: "10ms"}, c.policy)
			if err := p.CreatePod(context.Background(), pod); err != nil {
				t.Fatal(err)
			}
			if !c.restarts {
				got := r.waitFor(t, "terminal", func(p *corev1.Pod) bool { return p.Status.Phase != corev1.PodRunning })
				if got.Status.Phase != c.phase {
					t.Fatalf("phase %s, want %s", got.Status.Phase, c.phase)
				}
				want, _ := strconv.Atoi(c.code)
				if code := got.Status.ContainerStatuses[0].State.Terminated.ExitCode; code != int32(want) {
					t.Errorf("exit code %d, want %s", code, c.code)
				}
				return
			}
			got := r.waitFor(t, "restarted twice", func(p *corev1.Pod) bool { return p.Status.ContainerStatuses[0].RestartCount >= 2 })
			if got.Status.Phase != corev1.PodRunning {
				t.Errorf("a restarting pod is Running, got %s", got.Status.Phase)
			}
			want, _ := strconv.Atoi(c.code)
			if last := got.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != int32(want) {
				t.Errorf("last termination %+v", got.Status.ContainerStatuses[0].LastTerminationState)
			}
		})
	}
}

func TestFailStartAndStartDelay(t *testing.T) {
	p, r := newProvider(t)
	if err := p.CreatePod(context.Background(), testPod("broken", map[string]string{AnnotationFailStart: "image missing"}, corev1.RestartPolicyNever)); err != nil {
		t.Fatal(err)
	}
	got := r.last()
	term := got.Status.ContainerStatuses[0].State.Terminated
	if got.Status.Phase != corev1.PodFailed || term == nil || term.Reason != "StartError" || term.ExitCode != 128 || term.Message != "image missing" {
		t.Fatalf("fail-start: %+v", got.Status)
	}

	if err := p.CreatePod(context.Background(), testPod("slow", map[string]string{AnnotationStartDelay: "50ms"}, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	if got := r.last(); got.Status.Phase != corev1.PodPending || got.Status.ContainerStatuses[0].State.Waiting.Reason != "ContainerCreating" {
		t.Fatalf("start-delay: %+v", got.Status)
	}
	r.waitFor(t, "running after the delay", func(p *corev1.Pod) bool { return p.Name == "slow" && p.Status.Phase == corev1.PodRunning })
}

func TestBadAnnotationIsInvalidInput(t *testing.T) {
	p, _ := newProvider(t)
	for ann, value := range map[string]string{
		AnnotationRunFor: "soon", AnnotationExitCode: "300", AnnotationCPUUsage: "lots", AnnotationLogInterval: "0s",
	} {
		err := p.CreatePod(context.Background(), testPod("bad", map[string]string{ann: value}, corev1.RestartPolicyAlways))
		if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), ann) {
			t.Errorf("%s=%q: %v", ann, value, err)
		}
	}
	// A per-container annotation is named with its container.
	err := p.CreatePod(context.Background(), testPod("bad", map[string]string{AnnotationExitCode + ".app": "x"}, corev1.RestartPolicyAlways))
	if err == nil || !strings.Contains(err.Error(), AnnotationExitCode+".app") {
		t.Errorf("per-container annotation: %v", err)
	}
}

func TestScriptMinimums(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	for _, c := range []struct {
		annotation string
		minimum    time.Duration
	}{
		{AnnotationLogInterval, MinLogInterval},
		{AnnotationRunFor, MinRunFor},
		{AnnotationRestartDelay, MinRestartDelay},
	} {
		for _, hostile := range []string{"1ns", "0s", (c.minimum - time.Nanosecond).String()} {
			err := p.CreatePod(ctx, testPod("hostile", map[string]string{c.annotation: hostile}, corev1.RestartPolicyAlways))
			want := fmt.Sprintf("annotation %s: %q is below the minimum of %s", c.annotation, hostile, c.minimum)
			if !errdefs.IsInvalidInput(err) || err.Error() != want {
				t.Errorf("%s=%s: %v, want InvalidInput %q", c.annotation, hostile, err, want)
			}
		}
		if err := p.CreatePod(ctx, testPod("at-minimum", map[string]string{c.annotation: c.minimum.String()}, corev1.RestartPolicyAlways)); err != nil {
			t.Errorf("%s at its minimum %s: %v", c.annotation, c.minimum, err)
		}
	}
	if _, err := p.GetPod(ctx, "ns", "hostile"); !errdefs.IsNotFound(err) {
		t.Errorf("a rejected pod runs: %v", err)
	}
}

func TestLogs(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	if err := p.CreatePod(ctx, testPod("web", map[string]string{AnnotationLogInterval: "10ms"}, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	time.Sleep(65 * time.Millisecond)
	read := func(opts api.ContainerLogOpts) string {
		t.Helper()
		rc, err := p.GetContainerLogs(ctx, "ns", "web", "app", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, _ := io.ReadAll(rc)
		return string(b)
	}
	all := read(api.ContainerLogOpts{Tail: -1})
	lines := strings.Split(strings.TrimSpace(all), "\n")
	if len(lines) < 6 || lines[0] != "ns/web/app line 1" || lines[1] != "ns/web/app line 2" {
		t.Fatalf("log: %q", all)
	}
	if got := read(api.ContainerLogOpts{Tail: 2}); strings.Count(got, "\n") != 2 || !strings.HasSuffix(got, lines[len(lines)-1]+"\n") {
		t.Errorf("tail 2: %q", got)
	}
	if got := read(api.ContainerLogOpts{Tail: 0}); got != "" {
		t.Errorf("tail 0: %q", got)
	}
	if got := read(api.ContainerLogOpts{Tail: -1, LimitBytes: 5}); got != "ns/we" {
		t.Errorf("limitBytes 5: %q", got)
	}
	ts := read(api.ContainerLogOpts{Tail: 1, Timestamps: true})
	stamp, text, _ := strings.Cut(strings.TrimSpace(ts), " ")
	if _, err := time.Parse(time.RFC3339Nano, stamp); err != nil || !strings.HasPrefix(text, "ns/web/app line") {
		t.Errorf("timestamps: %q", ts)
	}
	if got := read(api.ContainerLogOpts{Tail: -1, SinceTime: time.Now().Add(time.Hour)}); got != "" {
		t.Errorf("since the future: %q", got)
	}
	if _, err := p.GetContainerLogs(ctx, "ns", "web", "app", api.ContainerLogOpts{Previous: true}); !errdefs.IsInvalidInput(err) {
		t.Errorf("previous of a first instance: %v", err)
	}
	if _, err := p.GetContainerLogs(ctx, "ns", "web", "nope", api.ContainerLogOpts{}); !errdefs.IsNotFound(err) {
		t.Errorf("unknown container: %v", err)
	}

	// Follow delivers new lines as they are written.
	fctx, cancel := context.WithCancel(ctx)
	rc, err := p.GetContainerLogs(fctx, "ns", "web", "app", api.ContainerLogOpts{Tail: 0, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 64)
	n, err := rc.Read(buf)
	if err != nil || !strings.HasPrefix(string(buf[:n]), "ns/web/app line") {
		t.Fatalf("follow: %q %v", buf[:n], err)
	}
	cancel()
	_, _ = io.ReadAll(rc)
}

// TestLogsAreMadeOnDemand: a container that has logged every 10ms for a
// year (3 billion lines) answers a tail, a byte limit and the start of its
// whole log without building it: memory stays flat.
func TestLogsAreMadeOnDemand(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	if err := p.CreatePod(ctx, testPod("chatty", map[string]string{AnnotationLogInterval: MinLogInterval.String()}, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	c := p.pods[podKey("ns", "chatty")].containers[0]
	c.instances[0].start = c.instances[0].start.Add(-365 * 24 * time.Hour)
	p.mu.Unlock()
	written := int(365 * 24 * time.Hour / MinLogInterval)

	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	read := func(opts api.ContainerLogOpts, max int64) string {
		t.Helper()
		rc, err := p.GetContainerLogs(ctx, "ns", "chatty", "app", opts)
		if err != nil {
			t.Fatal(err)
		}
		defer rc.Close()
		b, err := io.ReadAll(io.LimitReader(rc, max))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	tail := read(api.ContainerLogOpts{Tail: 2}, 1<<20)
	lines := strings.Split(strings.TrimSuffix(tail, "\n"), "\n")
	if len(lines) != 2 || !strings.HasPrefix(lines[0], "ns/chatty/app line ") {
		t.Fatalf("tail 2: %q", tail)
	}
	if n, _ := strconv.Atoi(strings.TrimPrefix(lines[1], "ns/chatty/app line ")); n < written {
		t.Errorf("tail 2 ends at line %d, want at least %d", n, written)
	}
	if got := read(api.ContainerLogOpts{Tail: -1, LimitBytes: 42}, 1<<20); got != "ns/chatty/app line 1\nns/chatty/app line 2\n" {
		t.Errorf("limitBytes 42: %q", got)
	}
	whole := read(api.ContainerLogOpts{Tail: -1}, 8<<20)
	if len(whole) != 8<<20 || !strings.HasPrefix(whole, "ns/chatty/app line 1\n") {
		t.Errorf("whole log: %d bytes starting %.40q", len(whole), whole)
	}
	runtime.ReadMemStats(&after)
	// Reading 8 MiB needs about that much; building the log would take
	// 90 GB.
	if grown := int64(after.TotalAlloc - before.TotalAlloc); grown > 256<<20 {
		t.Errorf("reading the log allocated %d MiB", grown>>20)
	}
}

// fakeIO is an api.AttachIO over buffers.
type fakeIO struct {
	stdin          io.Reader
	stdout, stderr *closeBuffer
	tty            bool
	resize         chan api.TermSize
}

type closeBuffer struct{ bytes.Buffer }

func (*closeBuffer) Close() error { return nil }

func (f *fakeIO) Stdin() io.Reader { return f.stdin }
func (f *fakeIO) Stdout() io.WriteCloser {
	if f.stdout == nil {
		return nil
	}
	return f.stdout
}
func (f *fakeIO) Stderr() io.WriteCloser {
	if f.stderr == nil {
		return nil
	}
	return f.stderr
}
func (f *fakeIO) TTY() bool                   { return f.tty }
func (f *fakeIO) Resize() <-chan api.TermSize { return f.resize }

func TestExec(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	if err := p.CreatePod(ctx, testPod("web", nil, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	run := func(stdin string, cmd ...string) (string, string, int) {
		io := &fakeIO{stdin: strings.NewReader(stdin), stdout: &closeBuffer{}, stderr: &closeBuffer{}}
		err := p.RunInContainer(ctx, "ns", "web", "app", cmd, io)
		code := 0
		var exit utilexec.ExitError
		if errors.As(err, &exit) {
			code = exit.ExitStatus()
		} else if err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return io.stdout.String(), io.stderr.String(), code
	}
	cases := []struct {
		stdin       string
		cmd         []string
		out, errOut string
		code        int
	}{
		{"", []string{"echo", "hello", "world"}, "hello world\n", "", 0},
		{"some input", []string{"cat"}, "some input", "", 0},
		{"", []string{"printenv", "GREETING"}, "hi\n", "", 0},
		{"", []string{"printenv", "GREETING", "UNSET", "GREETING"}, "hi\nhi\n", "", 1},
		{"", []string{"printenv"}, "GREETING=hi\n", "", 0},
		{"", []string{"env"}, "GREETING=hi\n", "", 0},
		{"", []string{"env", "printenv", "GREETING"}, "hi\n", "", 0},
		{"", []string{"hostname"}, "web\n", "", 0},
		{"", []string{"false"}, "", "", 1},
		{"", []string{"sh", "-c", "echo one; exit 7; echo two"}, "one\n", "", 7},
		{"", []string{"nope"}, "", "nope: command not found\n", 127},
		{"", []string{"cat", "/etc/resolv.conf"}, "search ns.svc.cluster.local svc.cluster.local cluster.local\noptions ndots:5\n", "", 0},
		{"", []string{"cat", "/etc/passwd"}, "", "cat: /etc/passwd: No such file or directory\n", 1},
	}
	for _, c := range cases {
		out, errOut, code := run(c.stdin, c.cmd...)
		if out != c.out || errOut != c.errOut || code != c.code {
			t.Errorf("%v: got (%q, %q, %d), want (%q, %q, %d)", c.cmd, out, errOut, code, c.out, c.errOut, c.code)
		}
	}
	if err := p.RunInContainer(ctx, "ns", "web", "nope", []string{"true"}, &fakeIO{}); !errdefs.IsNotFound(err) {
		t.Errorf("unknown container: %v", err)
	}
}

func TestPortForwardEchoes(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	if err := p.CreatePod(ctx, testPod("web", nil, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	a, b := pipePair()
	go func() { _ = p.PortForward(ctx, "ns", "web", 8080, b) }()
	if _, err := a.Write([]byte("ping")); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 4)
	if _, err := io.ReadFull(a, buf); err != nil || string(buf) != "ping" {
		t.Fatalf("echo: %q %v", buf, err)
	}
	a.Close()
	if err := p.PortForward(ctx, "ns", "web", 9999, nopRWC{}); !errdefs.IsNotFound(err) {
		t.Errorf("undeclared port: %v", err)
	}
}

type nopRWC struct{}

func (nopRWC) Read([]byte) (int, error)    { return 0, io.EOF }
func (nopRWC) Write(b []byte) (int, error) { return len(b), nil }
func (nopRWC) Close() error                { return nil }

// pipePair returns two connected ReadWriteClosers.
func pipePair() (io.ReadWriteCloser, io.ReadWriteCloser) {
	r1, w1 := io.Pipe()
	r2, w2 := io.Pipe()
	return &rwc{r1, w2}, &rwc{r2, w1}
}

type rwc struct {
	*io.PipeReader
	*io.PipeWriter
}

func (c *rwc) Close() error { c.PipeReader.Close(); return c.PipeWriter.Close() }

func TestStats(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	pod := testPod("busy", map[string]string{AnnotationCPUUsage: "250m", AnnotationMemoryUsage: "64Mi"}, corev1.RestartPolicyAlways)
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	s, err := p.GetStatsSummary(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 || *s.Pods[0].Containers[0].CPU.UsageNanoCores != 250_000_000 || *s.Pods[0].Memory.WorkingSetBytes != 64<<20 {
		t.Fatalf("pod stats: %+v", s.Pods)
	}
	// The node's figures are its pods' plus the process's own, which are
	// never zero (metrics-server leaves out a node with zero figures).
	if *s.Node.CPU.UsageNanoCores < 250_000_000 || *s.Node.Memory.WorkingSetBytes <= 64<<20 ||
		*s.Node.CPU.UsageCoreNanoSeconds == 0 || s.Node.NodeName != "vk0" {
		t.Fatalf("node stats: cpu %d (%d cumulative), memory %d", *s.Node.CPU.UsageNanoCores, *s.Node.CPU.UsageCoreNanoSeconds, *s.Node.Memory.WorkingSetBytes)
	}
}

// TestStatsCountersNeverGoDown: a restart resets the container's counter
// (with a new start time) but not the pod's, and deleting a pod does not
// take its CPU time out of the node's, as with the kubelet's cgroup
// counters; metrics-server rejects a counter that goes down.
func TestStatsCountersNeverGoDown(t *testing.T) {
	p, r := newProvider(t)
	ctx := context.Background()
	crashing := testPod("crashing", map[string]string{AnnotationCPUUsage: "1", AnnotationRunFor: "200ms",
		AnnotationExitCode: "1", AnnotationRestartDelay: "10ms"}, corev1.RestartPolicyAlways)
	steady := testPod("steady", map[string]string{AnnotationCPUUsage: "2"}, corev1.RestartPolicyAlways)
	for _, pod := range []*corev1.Pod{crashing, steady} {
		if err := p.CreatePod(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	counters := func() (node, crashingPod uint64) {
		t.Helper()
		s, err := p.GetStatsSummary(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, ps := range s.Pods {
			if ps.PodRef.Name == "crashing" {
				crashingPod = *ps.CPU.UsageCoreNanoSeconds
			}
		}
		return *s.Node.CPU.UsageCoreNanoSeconds, crashingPod
	}
	time.Sleep(150 * time.Millisecond)
	node0, pod0 := counters()
	r.waitFor(t, "restarted", func(p *corev1.Pod) bool {
		return p.Name == "crashing" && p.Status.ContainerStatuses[0].RestartCount >= 1 && p.Status.ContainerStatuses[0].State.Running != nil
	})
	node1, pod1 := counters()
	// One core for the whole first run (200ms) at least.
	if pod1 <= pod0 || pod1 < 200_000_000 {
		t.Errorf("pod counter across a restart: %d then %d, want it to keep the first run's 200ms", pod0, pod1)
	}
	if err := p.DeletePod(ctx, crashing); err != nil {
		t.Fatal(err)
	}
	node2, _ := counters()
	if node1 < node0 || node2 < node1 {
		t.Errorf("node counter went down: %d, %d, %d", node0, node1, node2)
	}
}

// TestMetricsResource: the mock's node serves /metrics/resource written
// from its summary, naming its pods' containers with their figures.
func TestMetricsResource(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	if err := p.CreatePod(ctx, testPod("busy", map[string]string{AnnotationMemoryUsage: "64Mi"}, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	cfg := node.CapabilitiesOf(p).PodHandlerConfig()
	if cfg.GetMetricsResource != nil {
		t.Error("the mock has metric families of its own")
	}
	rec := httptest.NewRecorder()
	api.PodHandler(cfg, false).ServeHTTP(rec, httptest.NewRequest("GET", api.MetricsResourceRouteSuffix, nil))
	want := `container_memory_working_set_bytes{container="app",namespace="ns",pod="busy"} 6.7108864e+07 `
	if rec.Code != 200 || !strings.Contains(rec.Body.String(), want) {
		t.Errorf("%d, want %q in\n%s", rec.Code, want, rec.Body.String())
	}
}

func TestConfig(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	good := write("good.json", `{"vk0": {"cpu": "8", "pods": "50", "nvidia.com/gpu": "2"}}`)
	cfg, err := loadConfig(good, "vk0")
	if err != nil {
		t.Fatal(err)
	}
	capacity := cfg.capacity
	if capacity.Cpu().String() != "8" || capacity.Pods().Value() != 50 || capacity.Memory().String() != "100Gi" {
		t.Errorf("capacity %v", capacity)
	}
	if q := capacity["nvidia.com/gpu"]; q.Value() != 2 {
		t.Errorf("extended resource: %v", capacity)
	}
	cases := map[string]struct{ content, node, want string }{
		"missing file":       {"", "vk0", "no such file"},
		"syntax":             {"{\"vk0\": {\"cpu\": \"8\",}}", "vk0", "line 1, column 22"},
		"wrong type":         {`{"vk0": {"cpu": 8}}`, "vk0", `node "vk0": cpu: quantity must be a string such as "8" or "16Gi", got 8`},
		"bad quantity":       {`{"vk0": {"memory": "lots"}}`, "vk0", `node "vk0": memory: invalid quantity "lots"`},
		"negative":           {`{"vk0": {"cpu": "-1"}}`, "vk0", "must not be negative"},
		"no entry":           {`{"vk1": {}}`, "vk0", `no entry for node "vk0" (entries: vk1)`},
		"not an object":      {`["vk0"]`, "vk0", "must be an object keyed by node name"},
		"node not an object": {`{"vk0": "big"}`, "vk0", `node "vk0": must be an object`},
		"empty":              {"", "vk0", "empty file"},
	}
	for name, c := range cases {
		path := filepath.Join(dir, "missing.json")
		if name != "missing file" {
			path = write(strings.ReplaceAll(name, " ", "_")+".json", c.content)
		}
		_, err := loadConfig(path, c.node)
		if err == nil || !strings.Contains(err.Error(), c.want) || !strings.Contains(err.Error(), path) {
			t.Errorf("%s: %v, want it to name %s and say %q", name, err, path, c.want)
		}
	}
}

func TestCPUTime(t *testing.T) {
	for _, c := range []struct {
		nanoCores uint64
		d         time.Duration
		want      uint64
	}{
		{250_000_000, 10 * time.Second, 2_500_000_000},
		{250_000_000, 10*time.Second + time.Millisecond, 2_500_250_000},
		{1_000_000_000_000, 24 * time.Hour, 86_400 * 1_000_000_000_000}, // 1000 cores for a day
		{3, time.Second / 2, 1},
		{250_000_000, -time.Second, 0},
		{math.MaxUint64, math.MaxInt64, math.MaxUint64},
	} {
		if got := cpuTime(c.nanoCores, c.d); got != c.want {
			t.Errorf("cpuTime(%d, %s) = %d, want %d", c.nanoCores, c.d, got, c.want)
		}
	}
}

// TestPodIPsGiven: the mock runs a pod with the IPs the pod controller
// decided (dual-stack too), and offers its own when none are offered.
func TestPodIPsGiven(t *testing.T) {
	p, r := newProvider(t)
	ctx := context.Background()
	pod := testPod("dual", nil, corev1.RestartPolicyAlways)
	pod.Status.PodIPs = []corev1.PodIP{{IP: "10.244.7.2"}, {IP: "fd00:7::2"}}
	if ips, err := p.AssignPodIPs(ctx, pod); err != nil || len(ips) != 2 || ips[1] != "fd00:7::2" {
		t.Fatalf("offered IPs: %v, %v; want them taken", ips, err)
	}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	got := r.last().Status
	if got.PodIP != "10.244.7.2" || len(got.PodIPs) != 2 || got.PodIPs[1].IP != "fd00:7::2" {
		t.Errorf("status IPs %q %v, want the given ones", got.PodIP, got.PodIPs)
	}

	own, err := p.AssignPodIPs(ctx, testPod("own", nil, corev1.RestartPolicyAlways))
	if err != nil || len(own) != 1 || !strings.HasPrefix(own[0], "10.244.") {
		t.Errorf("nothing offered: %v, %v; want one of the mock's own", own, err)
	}
}

// TestPodsShareTheirEnvironment: the mock keeps one instance of a
// container environment its pods repeat, as every pod of a namespace gets
// the same service variables.
func TestPodsShareTheirEnvironment(t *testing.T) {
	p, _ := newProvider(t)
	for _, name := range []string{"a", "b"} {
		if err := p.CreatePod(context.Background(), testPod(name, nil, corev1.RestartPolicyAlways)); err != nil {
			t.Fatal(err)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	a, b := p.pods["ns/a"].containers[0].spec.env, p.pods["ns/b"].containers[0].spec.env
	if len(a) != 1 || a[0].Value != "hi" || &a[0] != &b[0] {
		t.Errorf("environments %v and %v are not one instance", a, b)
	}
}
