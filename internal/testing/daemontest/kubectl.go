package daemontest

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"
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
	pf := c.KubectlCommand(ctx, "-n", ns,
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

// PodColumns records, per pod, every READY and STATUS pair that
// `kubectl get pods --watch` prints in a namespace. Watching, unlike
// polling, sees a status the API server held only briefly.
type PodColumns struct {
	mu   sync.Mutex
	seen map[string][]string // pod name → distinct "READY STATUS" in order
}

// WatchPodColumns starts kubectl get pods --watch in ns for the rest of
// the test.
func WatchPodColumns(t *testing.T, c *testcluster.Cluster, ns string) *PodColumns {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	cmd := c.KubectlCommand(ctx, "-n", ns,
		"get", "pods", "--watch", "--no-headers")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	w := &PodColumns{seen: map[string][]string{}}
	done := make(chan struct{})
	go func() {
		defer close(done)
		lines := bufio.NewScanner(stdout)
		for lines.Scan() {
			if f := strings.Fields(lines.Text()); len(f) >= 3 {
				w.add(f[0], f[1]+" "+f[2])
			}
		}
	}()
	t.Cleanup(func() { stop(); <-done; _ = cmd.Wait() })
	return w
}

func (w *PodColumns) add(pod, columns string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if s := w.seen[pod]; len(s) == 0 || s[len(s)-1] != columns {
		w.seen[pod] = append(s, columns)
	}
}

// WaitFor waits until kubectl has printed want for pod, in that order
// (other statuses may come between).
func (w *PodColumns) WaitFor(t *testing.T, pod string, want ...string) {
	t.Helper()
	Eventually(t, fmt.Sprintf("kubectl get pods --watch shows %s %v", pod, want), func() (bool, string) {
		w.mu.Lock()
		seen := slices.Clone(w.seen[pod])
		w.mu.Unlock()
		next := 0
		for _, s := range seen {
			if next < len(want) && s == want[next] {
				next++
			}
		}
		return next == len(want), fmt.Sprintf("seen %v", seen)
	})
}
