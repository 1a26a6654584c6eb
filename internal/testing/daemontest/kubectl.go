package daemontest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// Kubectl runs the cluster's kubectl as admin and returns its output,
// failing the test when it fails.
func Kubectl(t *testing.T, c *testcluster.Cluster, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := c.Kubectl(ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// PortForwardEcho runs kubectl port-forward to port of pod, sends line
// through it and returns what comes back, up to the first newline.
func PortForwardEcho(t *testing.T, c *testcluster.Cluster, ns, pod string, port int, line string) (string, error) {
	t.Helper()
	local := freeport.Get(t)
	ctx, stop := context.WithCancel(context.Background())
	defer stop()
	pf := exec.CommandContext(ctx, filepath.Join(c.Info.BinDir, "kubectl"), "--kubeconfig", c.Info.Kubeconfig, "-n", ns,
		"port-forward", "pod/"+pod, fmt.Sprintf("%d:%d", local, port))
	stdout, _ := pf.StdoutPipe()
	if err := pf.Start(); err != nil {
		return "", err
	}
	defer func() { stop(); _ = pf.Wait() }()
	ready := make(chan string, 1)
	go func() {
		line, _ := bufio.NewReader(stdout).ReadString('\n')
		ready <- line
		_, _ = io.Copy(io.Discard, stdout)
	}()
	select {
	case first := <-ready:
		if !strings.Contains(first, "Forwarding from") {
			return "", fmt.Errorf("kubectl port-forward: %q", first)
		}
	case <-time.After(30 * time.Second):
		return "", errors.New("kubectl port-forward did not start")
	}
	conn, err := net.Dial("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(local)))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(30 * time.Second))
	if _, err := conn.Write([]byte(line)); err != nil {
		return "", err
	}
	return bufio.NewReader(conn).ReadString('\n')
}
