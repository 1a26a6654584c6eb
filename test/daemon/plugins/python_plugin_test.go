//go:build e2e

package plugins_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/test/e2e"
)

// pythonPluginDir is plugin/python of this checkout.
const pythonPluginDir = "../../../plugin/python"

// startPythonPlugin generates the plugin's stubs and runs plugin.py on a
// unix socket; it returns the --provider-config of --provider grpc for it.
// Without python3's grpc modules it skips, unless CI is set: `make test`
// and .ci/run install them (plugin/python/install.sh).
func startPythonPlugin(t *testing.T) string {
	t.Helper()
	python, err := exec.Command(filepath.Join(pythonPluginDir, "install.sh")).Output()
	if err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("the Python plugin needs python3-grpcio, python3-grpc-tools and python3-protobuf: run plugin/python/install.sh as root (%v)", err)
		}
		t.Fatalf("plugin/python/install.sh: %v", err)
	}
	dir, err := os.MkdirTemp("", "vkpy") // a unix socket's path has at most 107 bytes
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	stubs := filepath.Join(dir, "stubs")
	if out, err := exec.Command(filepath.Join(pythonPluginDir, "gen.sh"), stubs).CombinedOutput(); err != nil {
		t.Fatalf("plugin/python/gen.sh: %v\n%s", err, out)
	}
	sock := filepath.Join(dir, "py.sock")
	cmd := exec.Command(strings.TrimSpace(string(python)), filepath.Join(pythonPluginDir, "plugin.py"),
		"--listen", "unix://"+sock, "--root", filepath.Join(dir, "pods"))
	cmd.Env = append(os.Environ(), "VK_PLUGIN_STUBS="+stubs)
	output := &childproc.Output{}
	cmd.Stdout, cmd.Stderr = output, output
	p, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if p.Stop(10 * time.Second) {
			t.Errorf("the Python plugin did not exit within 10s of SIGTERM")
		}
		if t.Failed() {
			t.Logf("Python plugin output:\n%s", output.String())
		}
	})
	cfg := filepath.Join(dir, "grpc.yaml")
	if err := os.WriteFile(cfg, []byte("endpoint: unix://"+sock+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// kubectlIn runs kubectl in namespace ns with stdin, bounded by 30 s.
func kubectlIn(c *testcluster.Cluster, ns, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := c.KubectlCommand(ctx, append([]string{"-n", ns}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// echoServer is a container command: a line echo server on 127.0.0.1:port.
func echoServer(port int) []string {
	return []string{"/usr/bin/python3", "-c", fmt.Sprintf(`import socket
s = socket.create_server(("127.0.0.1", %d))
while True:
    c, _ = s.accept()
    f = c.makefile("rwb")
    f.write(f.readline())
    f.flush()
    c.close()`, port)}
}

// TestPythonPlugin: the Python plugin (plugin/python) behind --provider
// grpc runs a pod's containers as local processes; through the API server
// the pod goes Running, kubectl logs, exec and port-forward reach the
// processes, and deleting the pod ends them and the pod is gone.
func TestPythonPlugin(t *testing.T) {
	cfg := startPythonPlugin(t)
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	d := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")), "--provider", "grpc", "--provider-config", cfg)
	daemontest.WaitNodeReady(t, c.Client, d.Name)

	port := freeport.Get(t)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "py"},
		Spec: corev1.PodSpec{
			NodeName: d.Name, Tolerations: daemontest.Tolerate,
			Containers: []corev1.Container{{
				Name: "main", Image: "local",
				Command: []string{"sh", "-c"},
				Args:    []string{`echo "hello $GREETING"; i=0; while true; do i=$((i+1)); echo "line $i"; sleep 0.1; done`},
				Env:     []corev1.EnvVar{{Name: "GREETING", Value: "from python"}},
			}, {
				Name: "echo", Image: "local", Command: echoServer(port),
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := daemontest.WaitPod(t, c.Client, ns, "py", "Running, both containers started", func(p *corev1.Pod) bool {
		ready := 0
		for _, s := range p.Status.ContainerStatuses {
			if s.State.Running != nil {
				ready++
			}
		}
		return p.Status.Phase == corev1.PodRunning && ready == 2
	})
	var pids []int
	for _, s := range running.Status.ContainerStatuses {
		pid, err := strconv.Atoi(strings.TrimPrefix(s.ContainerID, "process://"))
		if err != nil {
			t.Fatalf("container %s: ID %q is not process://PID", s.Name, s.ContainerID)
		}
		pids = append(pids, pid)
	}

	daemontest.Eventually(t, "kubectl logs shows the first line and a few more", func() (bool, string) {
		out, err := kubectlIn(c, ns, "", "logs", "py", "-c", "main")
		return err == nil && strings.HasPrefix(out, "hello from python\nline 1\n") && strings.Contains(out, "line 3\n"), out
	})
	if out, err := kubectlIn(c, ns, "", "logs", "py", "-c", "main", "--tail=1"); err != nil || !strings.HasPrefix(out, "line ") || strings.Count(out, "\n") != 1 {
		t.Errorf("kubectl logs --tail=1: %v %q", err, out)
	}
	if out, err := kubectlIn(c, ns, "", "logs", "py", "-c", "main", "--timestamps", "--limit-bytes=20"); err != nil || len(out) != 20 || !strings.HasPrefix(out, time.Now().UTC().Format("2006-01-02T")) {
		t.Errorf("kubectl logs --timestamps --limit-bytes=20: %v %q", err, out)
	}
	if out, err := kubectlIn(c, ns, "", "logs", "py", "-c", "nope"); err == nil || !strings.Contains(out, "nope") {
		t.Errorf("logs of an unknown container must fail naming it: %v %q", err, out)
	}

	if out, err := kubectlIn(c, ns, "", "exec", "py", "-c", "main", "--", "printenv", "GREETING"); err != nil || out != "from python\n" {
		t.Errorf("kubectl exec printenv: %v %q", err, out)
	}
	if out, err := kubectlIn(c, ns, "through stdin\n", "exec", "-i", "py", "-c", "main", "--", "cat"); err != nil || out != "through stdin\n" {
		t.Errorf("kubectl exec -i cat: %v %q", err, out)
	}
	out, err := kubectlIn(c, ns, "", "exec", "py", "-c", "main", "--", "sh", "-c", "echo oops >&2; exit 42")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 42 || !strings.Contains(out, "oops") || !strings.Contains(out, "exit code 42") {
		t.Errorf("kubectl exec exit 42: %v %q", err, out)
	}

	// What the plugin's handshake does not declare answers 501 naming it.
	out, err = kubectlIn(c, ns, "", "attach", "py", "-c", "main")
	if err == nil || !strings.Contains(out, "attach is not implemented by this provider") {
		t.Errorf("kubectl attach on a plugin without attach: %v %q", err, out)
	}
	_, err = c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", d.Name, "proxy/stats/summary").DoRaw(ctx)
	var status *apierrors.StatusError
	if !errors.As(err, &status) || status.ErrStatus.Code != http.StatusNotImplemented || !strings.Contains(err.Error(), "stats summary is not implemented") {
		t.Errorf("stats/summary of a plugin without stats: want 501 naming it, got %v", err)
	}

	daemontest.Eventually(t, "port-forward reaches the echo container", func() (bool, string) {
		echo, err := daemontest.PortForwardEcho(t, c, ns, "py", port, "ping through port-forward\n")
		return err == nil && echo == "ping through port-forward\n", fmt.Sprintf("%v %q", err, echo)
	})

	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "py", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitGone(t, c.Client, ns, "py", running.UID)
	for _, pid := range pids {
		if err := syscall.Kill(pid, 0); !errors.Is(err, syscall.ESRCH) {
			t.Errorf("process %d of the deleted pod: kill -0 = %v, want no such process", pid, err)
		}
	}
	daemontest.CheckNoPanic(t, d)
}

// TestPythonPluginConformance runs the importable e2e suite against the
// Python plugin: its default container (sh -c ...) runs as a local
// process. The plugin serves no stats and no attach (TestPythonPlugin
// checks both answer 501), so those tests are skipped.
func TestPythonPluginConformance(t *testing.T) {
	cfg := startPythonPlugin(t)
	c := testcluster.Shared(t)
	d := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")), "--provider", "grpc", "--provider-config", cfg)
	e2e.NewEndToEndTestSuite(e2e.EndToEndTestSuiteConfig{
		RestConfig: c.Config,
		NodeName:   d.Name,
		ShouldSkipTest: func(name string) bool {
			return name == "TestGetStatsSummary" || name == "TestGetMetricsResource" || name == "TestAttach"
		},
	}).Run(t)
}
