package daemontest

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// Transport is how the daemon reaches the mock provider: compiled in, or
// behind the gRPC plugin boundary in a process of its own.
type Transport struct {
	// Name names the subtest.
	Name string
	// Start starts a node's daemon, as the package's Start does.
	Start func(t *testing.T, c *testcluster.Cluster, host *nethost.Host, extra ...string) *Daemon
}

var transports = []Transport{
	{"in-process", Start},
	{"grpc", func(t *testing.T, c *testcluster.Cluster, host *nethost.Host, extra ...string) *Daemon {
		d, _ := StartWithPlugin(t, c, host, extra...)
		return d
	}},
}

// ForEachTransport runs test as a subtest per transport.
func ForEachTransport(t *testing.T, test func(*testing.T, Transport)) {
	for _, tr := range transports {
		t.Run(tr.Name, func(t *testing.T) { test(t, tr) })
	}
}

// Plugin is a `virtual-kubelet plugin --provider mock` process.
type Plugin struct {
	*childproc.Process
	args []string
	// Output is what the plugin wrote to stdout and stderr.
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
	cmd := exec.Command(binary, p.args...)
	cmd.Stdout, cmd.Stderr = p.Output, p.Output
	var err error
	if p.Process, err = childproc.Start(cmd); err != nil {
		t.Fatal(err)
	}
}

// StartWithPlugin is Start with --provider grpc, the mock serving
// in a plugin process; a --provider-config in extra goes to the mock.
func StartWithPlugin(t *testing.T, c *testcluster.Cluster, host *nethost.Host, extra ...string) (*Daemon, *Plugin) {
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
	return Start(t, c, host, append(args, "--provider", "grpc", "--provider-config", cfg)...), p
}

// ReadyNode starts a node's daemon through tr in the shared cluster, in a
// node host of its own when inHost is set (so the API server can proxy to
// it) or else on loopback, and waits until its Node is Ready. It returns
// the cluster, a namespace of the test's own, and the daemon.
func (tr Transport) ReadyNode(t *testing.T, inHost bool) (*testcluster.Cluster, string, *Daemon) {
	t.Helper()
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	var host *nethost.Host
	if inHost {
		host = c.AddHost(t, testcluster.UniqueName("h"))
	}
	d := tr.Start(t, c, host)
	WaitNodeReady(t, c.Client, d.Name)
	return c, ns, d
}
