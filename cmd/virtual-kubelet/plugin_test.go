package main_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// Transport is how the daemon reaches the mock provider: compiled in, or
// behind the gRPC plugin boundary in a process of its own.
type Transport struct {
	Name  string
	Start func(t *testing.T, c *testcluster.Cluster, host *nethost.Host, extra ...string) *Daemon
}

var transports = []Transport{
	{"in-process", StartDaemon},
	{"grpc", func(t *testing.T, c *testcluster.Cluster, host *nethost.Host, extra ...string) *Daemon {
		d, _ := StartPluginDaemon(t, c, host, extra...)
		return d
	}},
}

// ForEachTransport runs test as a subtest per transport.
func ForEachTransport(t *testing.T, test func(*testing.T, Transport)) {
	for _, tr := range transports {
		t.Run(tr.Name, func(t *testing.T) { test(t, tr) })
	}
}

// Plugin is a `virtual-kubelet Plugin --provider mock` process.
type Plugin struct {
	*childproc.Process
	args   []string
	Output *childproc.Output
}

// StartPlugin runs the mock as a plugin for node name on the unix socket
// sock; mockConfig is its --provider-config, if any.
func StartPlugin(t *testing.T, name, sock, mockConfig string) *Plugin {
	t.Helper()
	args := []string{"--provider", "mock", "--nodename", name, "--listen", "unix://" + sock}
	if mockConfig != "" {
		args = append(args, "--provider-config", mockConfig)
	}
	return StartPluginWith(t, args...)
}

// StartPluginWith runs `virtual-kubelet plugin` with args until the test
// ends.
func StartPluginWith(t *testing.T, args ...string) *Plugin {
	t.Helper()
	p := &Plugin{args: append([]string{"plugin"}, args...), Output: &childproc.Output{}}
	p.Restart(t)
	t.Cleanup(func() {
		if !p.Exited() {
			p.Stop(10 * time.Second)
		}
		if t.Failed() {
			t.Logf("plugin output:\n%s", p.Output.String())
		}
	})
	return p
}

// Restart starts the plugin process (again).
func (p *Plugin) Restart(t *testing.T) {
	t.Helper()
	cmd := exec.Command(Binary, p.args...)
	cmd.Stdout, cmd.Stderr = p.Output, p.Output
	var err error
	if p.Process, err = childproc.Start(cmd); err != nil {
		t.Fatal(err)
	}
}

// StartPluginDaemon is StartDaemon with --provider grpc, the mock serving
// in a plugin process; a --provider-config in extra goes to the mock.
func StartPluginDaemon(t *testing.T, c *testcluster.Cluster, host *nethost.Host, extra ...string) (*Daemon, *Plugin) {
	t.Helper()
	name, mockConfig := testcluster.UniqueName("vk"), ""
	var rest []string
	for i := 0; i < len(extra); i++ {
		switch {
		case extra[i] == "--provider-config" && i+1 < len(extra):
			mockConfig = extra[i+1]
			i++
		case extra[i] == "--nodename" && i+1 < len(extra):
			name = extra[i+1]
			i++
		default:
			rest = append(rest, extra[i])
		}
	}
	// A unix socket's path has at most 107 bytes: not under t.TempDir.
	dir, err := os.MkdirTemp("", "vkplugin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "mock.sock")
	p := StartPlugin(t, name, sock, mockConfig)
	cfg := filepath.Join(dir, "grpc.yaml")
	if err := os.WriteFile(cfg, []byte("endpoint: unix://"+sock+"\ncallTimeout: 10s\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	args := append([]string{"--nodename", name}, rest...)
	return StartDaemon(t, c, host, append(args, "--provider", "grpc", "--provider-config", cfg)...), p
}

// TestPluginRestartLosesNothing: the mock behind the gRPC boundary, with a
// state directory, is killed and started again while the daemon runs. The
// daemon notices the outage (its Ping fails), a pod created meanwhile runs
// once the plugin is back, and the pods from before are the same pods:
// nothing created twice, nothing restarted. VK_PLUGIN_RESTART_PODS sizes
// it (20 by default; the 300 passes too, see the report).
func TestPluginRestartLosesNothing(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	name := testcluster.UniqueName("vk")
	cfg := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{%q: {"stateDir": %q}}`, name, filepath.Join(t.TempDir(), "state"))), 0o600); err != nil {
		t.Fatal(err)
	}
	d, p := StartPluginDaemon(t, c, nil, "--nodename", name, "--provider-config", cfg)
	WaitNodeReady(t, c.Client, d.Name)

	n := FloodSize(t, "VK_PLUGIN_RESTART_PODS", 20)
	create := func(name string) {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: d.Name, Tolerations: Tolerate,
				Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	running := func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	}
	before := map[string]*corev1.Pod{}
	for i := range n {
		create(fmt.Sprintf("p%d", i))
	}
	for i := range n {
		name := fmt.Sprintf("p%d", i)
		before[name] = WaitPod(t, c.Client, ns, name, "Running", running)
	}

	p.Kill()
	<-p.Done()
	create("during")
	Eventually(t, "the daemon sees the outage (Ping fails)", func() (bool, string) {
		return strings.Contains(d.Output.String(), "provider ping failed"), "no failed ping in the daemon's log yet"
	})
	p.Restart(t)
	restarted := time.Now()

	WaitPod(t, c.Client, ns, "during", "Running once the plugin is back", running)
	for name, old := range before {
		now := WaitPod(t, c.Client, ns, name, "still Running", running)
		was, is := old.Status.ContainerStatuses[0], now.Status.ContainerStatuses[0]
		if now.UID != old.UID || is.RestartCount != 0 || !is.State.Running.StartedAt.Equal(&was.State.Running.StartedAt) || now.Status.PodIP != old.Status.PodIP {
			t.Errorf("pod %s changed across the plugin restart: started %v → %v, restarts %d, IP %s → %s",
				name, was.State.Running.StartedAt, is.State.Running.StartedAt, is.RestartCount, old.Status.PodIP, now.Status.PodIP)
		}
	}
	t.Logf("%d pods from before the restart unchanged, the one created during the outage Running, %s after the plugin restarted", n, time.Since(restarted).Round(time.Millisecond))
	if got := strings.Count(p.Output.String(), "serving provider mock"); got != 2 {
		t.Errorf("the plugin started %d times, want 2", got)
	}

	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "pods gone", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items))
	})
	for _, out := range []string{d.Output.String(), p.Output.String()} {
		if strings.Contains(out, "panic") || strings.Contains(out, "DATA RACE") {
			t.Errorf("panic or race in the output:\n%s", out)
		}
	}
}
