// Package daemontest runs the virtual-kubelet binary for end-to-end tests
// against a real control plane (package testcluster). It holds the helpers
// the packages that run the daemon share (test/daemon/..., the Slurm e2e
// tests): starting a node's daemon, in process or behind the gRPC plugin
// boundary, and waiting for what it does.
package daemontest

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// binary is the virtual-kubelet under test, built with -race by Main.
var binary string

// Binary is the path of the virtual-kubelet under test.
func Binary() string { return binary }

// Main builds the binary (or takes $VK_TEST_DAEMON's), then runs the
// package's tests with testcluster.Main; call it from TestMain.
func Main(m *testing.M) {
	var remove func()
	var err error
	if binary, remove, err = childproc.BuildDaemon(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	testcluster.Main(m, remove)
}

// Daemon is a running virtual-kubelet process.
type Daemon struct {
	*childproc.Process
	// Name is the node's name.
	Name string
	// Addr is the address it serves the kubelet API on.
	Addr string
	// Output is what the daemon wrote to stdout and stderr.
	Output *childproc.Output
	// command makes the daemon's command anew, for restart.
	command func() *exec.Cmd
}

// Start runs virtual-kubelet --provider mock for a new node. In a node
// host (host != nil) the API server can proxy to it; otherwise it runs on
// loopback. extra flags come last and win.
func Start(t *testing.T, c *testcluster.Cluster, host *nethost.Host, extra ...string) *Daemon {
	t.Helper()
	d := &Daemon{Name: testcluster.UniqueName("vk"), Output: &childproc.Output{}}
	count := 1
	for i := 0; i+1 < len(extra); i++ {
		switch extra[i] {
		case "--nodename":
			d.Name = extra[i+1]
		case "--node-count":
			count, _ = strconv.Atoi(extra[i+1])
		}
	}
	args := []string{"--provider", "mock", "--nodename", d.Name, "--metrics-addr", "", "--log-level", "debug"}
	if host != nil {
		d.Addr = host.Addr.String()
		// The kubeconfig's CA verifies the API server's client certificate.
		args = append(args, "--kubeconfig", c.Info.NodeKubeconfig, "--node-ip", d.Addr, "--listen-address", d.Addr)
		d.command = func() *exec.Cmd { return host.Command(context.Background(), binary, append(args, extra...)...) }
	} else {
		d.Addr = "127.0.0.1"
		args = append(args, "--kubeconfig", c.Info.Kubeconfig, "--node-ip", d.Addr, "--listen-address", d.Addr,
			"--listen-port", strconv.Itoa(freeport.GetBlock(t, max(count, 1))))
		d.command = func() *exec.Cmd { return exec.Command(binary, append(args, extra...)...) }
	}
	if err := d.start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Shutdown(t)
		names := []string{d.Name}
		if count > 1 { // --node-count's names
			names = names[:0]
			for i := range count {
				names = append(names, fmt.Sprintf("%s-%d", d.Name, i))
			}
		}
		for _, name := range names {
			_ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, DeleteNow)
		}
		if t.Failed() {
			t.Logf("virtual-kubelet output:\n%s", d.Output.String())
		}
	})
	return d
}

// start starts the daemon's process.
func (d *Daemon) start() error {
	cmd := d.command()
	cmd.Stdout, cmd.Stderr = d.Output, d.Output
	var err error
	d.Process, err = childproc.Start(cmd)
	return err
}

// Restart stops the daemon (SIGTERM) and starts it again with the same
// flags.
func (d *Daemon) Restart() error {
	if d.Stop(20 * time.Second) {
		return fmt.Errorf("virtual-kubelet did not exit within 20s of SIGTERM")
	}
	return d.start()
}

// Shutdown sends SIGTERM and returns the exit code and how long the exit took.
func (d *Daemon) Shutdown(t *testing.T) (int, time.Duration) {
	t.Helper()
	if d.Exited() {
		return d.Cmd.ProcessState.ExitCode(), 0
	}
	start := time.Now()
	if d.Stop(20 * time.Second) {
		t.Errorf("virtual-kubelet did not exit within 20s of SIGTERM")
	}
	return d.Cmd.ProcessState.ExitCode(), time.Since(start)
}

// Run runs virtual-kubelet to completion and returns its exit code and
// output.
func Run(t *testing.T, args ...string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, binary, args...)
	out, _ := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("%v did not exit within 30s:\n%s", args, out)
	}
	return cmd.ProcessState.ExitCode(), strings.TrimSpace(string(out))
}

// DeleteNow deletes an object without a grace period.
var DeleteNow = metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}

// SigningKey writes a provider's signing key and returns its path.
func SigningKey(t *testing.T) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "signing-key")
	if err := os.WriteFile(path, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
