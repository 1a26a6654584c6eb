package grpcplugin_test

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	utilexec "k8s.io/utils/exec"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/plugin/providerserver"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/grpcplugin"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// socketDir is a short directory: a unix socket path has at most 107 bytes.
func socketDir(t testing.TB) string {
	t.Helper()
	dir, err := os.MkdirTemp("", "vkp")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// servePlugin serves p on the unix socket sock until the returned stop is
// called (or the test ends).
func servePlugin(t testing.TB, sock string, p node.Provider) (stop func()) {
	t.Helper()
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- providerserver.Serve(ctx, lis, p) }()
	var once sync.Once
	stop = func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("Serve: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

// newMock is the mock provider for node vk0, with its pods kept in stateDir
// if not empty.
func newMock(t testing.TB, dir, stateDir string) node.Provider {
	t.Helper()
	cfg := ""
	if stateDir != "" {
		cfg = filepath.Join(dir, "mock.json")
		writeFile(t, cfg, fmt.Sprintf(`{"vk0": {"stateDir": %q}}`, stateDir))
	}
	p, err := mock.New(context.Background(), provider.InitConfig{NodeName: "vk0", OperatingSystem: "linux", ConfigPath: cfg})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

func writeFile(t testing.TB, path, content string) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

// dial is --provider grpc for the plugin on sock.
func dial(t testing.TB, dir, sock string) node.Provider {
	t.Helper()
	cfg := filepath.Join(dir, "grpc.yaml")
	writeFile(t, cfg, "endpoint: unix://"+sock+"\ncallTimeout: 5s\nconnectTimeout: 10s\n")
	p, err := grpcplugin.New(context.Background(), provider.InitConfig{ConfigPath: cfg, NodeName: "vk0", OperatingSystem: "linux", InternalIP: "10.0.0.1", DaemonPort: 10250})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// statuses records what NotifyPods reports.
type statuses struct {
	mu   sync.Mutex
	last map[string]*corev1.Pod
}

func watch(ctx context.Context, p node.Provider) *statuses {
	s := &statuses{last: map[string]*corev1.Pod{}}
	p.(node.PodNotifier).NotifyPods(ctx, func(pod *corev1.Pod) {
		s.mu.Lock()
		defer s.mu.Unlock()
		s.last[pod.Name] = pod
	})
	return s
}

func (s *statuses) waitPhase(t *testing.T, name string, phase corev1.PodPhase) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		s.mu.Lock()
		pod := s.last[name]
		s.mu.Unlock()
		if pod != nil && pod.Status.Phase == phase {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatalf("pod %s never reported %s", name, phase)
}

func testPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name),
			Annotations: map[string]string{mock.AnnotationLogInterval: "10ms"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "app", Image: "busybox",
			Env:   []corev1.EnvVar{{Name: "GREETING", Value: "hi"}},
			Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
		}}},
	}
}

// attachIO is an exec session's streams in memory.
type attachIO struct {
	stdin          io.Reader
	stdout, stderr bytes.Buffer
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (a *attachIO) Stdin() io.Reader            { return a.stdin }
func (a *attachIO) Stdout() io.WriteCloser      { return nopCloser{&a.stdout} }
func (a *attachIO) Stderr() io.WriteCloser      { return nopCloser{&a.stderr} }
func (a *attachIO) TTY() bool                   { return false }
func (a *attachIO) Resize() <-chan api.TermSize { return nil }

// TestMockThroughPlugin drives the mock provider through the plugin
// contract: the pod lifecycle with its pushed statuses, errors kinds,
// logs, exec with stdin and an exit code, port-forward and stats.
func TestMockThroughPlugin(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "p.sock")
	servePlugin(t, sock, newMock(t, dir, ""))
	p := dial(t, dir, sock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := watch(ctx, p)

	if err := p.(node.NodeProvider).Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
	if got := p.Capacity(ctx); got.Cpu().String() != mock.DefaultCapacity.Cpu().String() {
		t.Errorf("capacity %v", got)
	}
	if got := p.NodeAddresses(ctx); len(got) != 1 || got[0].Address != "10.0.0.1" {
		t.Errorf("addresses are the daemon's: %v", got)
	}
	if err := p.CreatePod(ctx, testPod("web")); err != nil {
		t.Fatal(err)
	}
	seen.waitPhase(t, "web", corev1.PodRunning)
	got, err := p.GetPod(ctx, "ns", "web")
	if err != nil || got.UID != "uid-web" || got.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("GetPod: %v %+v", err, got)
	}
	if _, err := p.GetPod(ctx, "ns", "nope"); !errdefs.IsNotFound(err) {
		t.Errorf("GetPod of an unknown pod: %v, want NotFound", err)
	}
	if pods, err := p.GetPods(ctx); err != nil || len(pods) != 1 {
		t.Errorf("GetPods: %v %d", err, len(pods))
	}

	logs := p.(node.LogsProvider)
	// Followed, the first line arrives as the mock writes it.
	r, err := logs.GetContainerLogs(ctx, "ns", "web", "app", api.ContainerLogOpts{Tail: -1, Follow: true})
	if err != nil {
		t.Fatal(err)
	}
	line, _ := bufio.NewReader(r).ReadString('\n')
	r.Close()
	if !strings.HasPrefix(line, "ns/web/app line ") {
		t.Errorf("logs --tail=1: %q", line)
	}
	if _, err := logs.GetContainerLogs(ctx, "ns", "web", "nope", api.ContainerLogOpts{Tail: -1}); !errdefs.IsNotFound(err) || !strings.Contains(err.Error(), "nope") {
		t.Errorf("logs of an unknown container: %v, want NotFound naming it", err)
	}

	exec := p.(node.ExecProvider)
	a := &attachIO{stdin: strings.NewReader("through stdin\n")}
	if err := exec.RunInContainer(ctx, "ns", "web", "app", []string{"cat"}, a); err != nil || a.stdout.String() != "through stdin\n" {
		t.Errorf("exec cat: %v %q", err, a.stdout.String())
	}
	a = &attachIO{}
	err = exec.RunInContainer(ctx, "ns", "web", "app", []string{"sh", "-c", "exit 42"}, a)
	var exit utilexec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 42 {
		t.Errorf("exec exit 42: %v", err)
	}

	client, server := net.Pipe()
	done := make(chan error, 1)
	go func() { done <- p.(node.PortForwardProvider).PortForward(ctx, "ns", "web", 8080, server) }()
	_ = client.SetDeadline(time.Now().Add(10 * time.Second))
	if _, err := client.Write([]byte("ping\n")); err != nil {
		t.Fatal(err)
	}
	echo := make([]byte, 5)
	if _, err := io.ReadFull(client, echo); err != nil || string(echo) != "ping\n" {
		t.Errorf("port-forward echo: %v %q", err, echo)
	}
	client.Close()
	if err := <-done; err != nil {
		t.Errorf("PortForward: %v", err)
	}

	summary, err := p.(node.StatsProvider).GetStatsSummary(ctx)
	if err != nil || summary.Node.NodeName != "vk0" || len(summary.Pods) != 1 {
		t.Errorf("stats: %v %+v", err, summary)
	}

	if err := p.DeletePod(ctx, got); err != nil {
		t.Fatal(err)
	}
	seen.waitPhase(t, "web", corev1.PodSucceeded)
}

// TestPluginWithoutCapabilities: a plugin serving only node.Provider (the
// mock with its optional interfaces hidden) is polled for pod status, and
// the kubelet API calls it lacks fail saying so.
func TestPluginWithoutCapabilities(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "p.sock")
	servePlugin(t, sock, struct{ node.Provider }{newMock(t, dir, "")})
	p := dial(t, dir, sock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	seen := watch(ctx, p)
	if err := p.CreatePod(ctx, testPod("web")); err != nil {
		t.Fatal(err)
	}
	seen.waitPhase(t, "web", corev1.PodRunning)
	if _, err := p.(node.LogsProvider).GetContainerLogs(ctx, "ns", "web", "app", api.ContainerLogOpts{}); err == nil || !strings.Contains(err.Error(), "does not serve logs") {
		t.Errorf("logs from a plugin without them: %v", err)
	}
}

// TestConnectionEndsWithProvider: the daemon ends a provider's context when
// it stops serving the node (a replica handing it over): the connection to
// the plugin must close with it, not linger for the process's life.
func TestConnectionEndsWithProvider(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "p.sock")
	servePlugin(t, sock, newMock(t, dir, ""))
	cfg := filepath.Join(dir, "grpc.yaml")
	writeFile(t, cfg, "endpoint: unix://"+sock+"\ncallTimeout: 5s\nconnectTimeout: 10s\n")
	life, end := context.WithCancel(context.Background())
	p, err := grpcplugin.New(life, provider.InitConfig{ConfigPath: cfg, NodeName: "vk0", OperatingSystem: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.(node.NodeProvider).Ping(context.Background()); err != nil {
		t.Fatalf("ping while the provider lives: %v", err)
	}
	end()
	deadline := time.Now().Add(10 * time.Second)
	for {
		err := p.(node.NodeProvider).Ping(context.Background())
		if err != nil && strings.Contains(err.Error(), "closing") {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("ping after the provider's context ended: %v, want the connection closed", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// growing is the mock with a capacity that changes once, to cpu.
type growing struct {
	node.Provider
	cpu string
}

func (g growing) NotifyCapacity(_ context.Context, f func(corev1.ResourceList)) {
	go f(corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(g.cpu), corev1.ResourcePods: resource.MustParse("10")})
}

// TestCapacityThroughPlugin: a CapacityNotifier behind the plugin boundary
// declares it, and the daemon's side reports the registered node with the
// new capacity (allocatable the same) as a node status change.
func TestCapacityThroughPlugin(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "p.sock")
	servePlugin(t, sock, growing{newMock(t, dir, ""), "7"})
	p := dial(t, dir, sock)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	nodes := make(chan *corev1.Node, 1)
	p.(node.NodeProvider).NotifyNodeStatus(ctx, func(n *corev1.Node) {
		select {
		case nodes <- n:
		default:
		}
	})
	select {
	case n := <-nodes:
		cpu, alloc := n.Status.Capacity[corev1.ResourceCPU], n.Status.Allocatable[corev1.ResourceCPU]
		if cpu.String() != "7" || alloc.String() != "7" || n.Status.Capacity.Pods().Value() != 10 {
			t.Errorf("capacity %v, allocatable %v; want cpu 7, pods 10 in both", n.Status.Capacity, n.Status.Allocatable)
		}
		if n.Status.NodeInfo.OperatingSystem != "linux" {
			t.Errorf("the registered node's other fields are lost: %+v", n.Status.NodeInfo)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no capacity change reached the daemon's side in 30s")
	}
}
