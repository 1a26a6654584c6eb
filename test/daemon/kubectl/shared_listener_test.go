//go:build e2e

package kubectl_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestSharedKubeletListener: three nodes of one process behind one kubelet
// API listener (--kubelet-listener shared). Every Node points at it, and
// through the API server kubectl logs, exec, attach, cp and port-forward
// reach each node's pod; metrics-server scrapes each node at the path its
// annotation gives, so kubectl top shows every pod and node; the node
// routes are each node's under /nodes/NAME; the process listens on one
// port.
func TestSharedKubeletListener(t *testing.T) {
	c := testcluster.MetricsServer(t)
	ctx := context.Background()
	logFile := c.Info.LogFile(controlplane.MetricsServer)
	logStart := fileSize(t, logFile)
	ns := c.Namespace(t)
	host := c.AddHost(t, testcluster.UniqueName("h"))
	d := daemontest.Start(t, c, host, "--node-count", "3", "--kubelet-listener", "shared")
	names := []string{d.Name + "-0", d.Name + "-1", d.Name + "-2"}

	for _, name := range names {
		n := daemontest.WaitNodeReady(t, c.Client, name)
		ip := ""
		for _, a := range n.Status.Addresses {
			if a.Type == corev1.NodeInternalIP {
				ip = a.Address
			}
		}
		if ip != d.Addr || n.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 ||
			n.Annotations[api.ResourceMetricsPathAnnotation] != "/nodes/"+name+"/metrics/resource" {
			t.Errorf("node %s: InternalIP %s, kubelet port %d, annotations %v; want %s, 10250 and its resource metrics path",
				name, ip, n.Status.DaemonEndpoints.KubeletEndpoint.Port, n.Annotations, d.Addr)
		}
	}
	if ports := listeningPorts(t, d.Cmd.Process.Pid); len(ports) != 1 || ports[0] != 10250 {
		t.Errorf("the daemon of 3 nodes listens on ports %v, want the one kubelet API port 10250", ports)
	}

	for i, name := range names {
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("web-%d", i), Annotations: map[string]string{
				mock.AnnotationLogInterval: "100ms", mock.AnnotationCPUUsage: fmt.Sprintf("%dm", 100*(i+1)), mock.AnnotationMemoryUsage: "64Mi",
			}},
			Spec: corev1.PodSpec{
				NodeName: name, Tolerations: daemontest.Tolerate,
				Containers: []corev1.Container{{
					Name: "app", Image: "nginx",
					Env:   []corev1.EnvVar{{Name: "NODE", Value: name}},
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}},
			},
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range names {
		daemontest.WaitPod(t, c.Client, ns, fmt.Sprintf("web-%d", i), "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	}
	time.Sleep(500 * time.Millisecond) // a few log lines

	kubectl := func(stdin string, args ...string) (string, error) { return kubectlIn(c, ns, stdin, args...) }
	local := t.TempDir()
	for i, name := range names {
		pod := fmt.Sprintf("web-%d", i)
		out, err := kubectl("", "logs", pod, "--tail=2")
		if lines := strings.Split(strings.TrimSpace(out), "\n"); err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], ns+"/"+pod+"/app line ") {
			t.Errorf("kubectl logs %s --tail=2: %v\n%s", pod, err, out)
		}
		if out, err := kubectl("", "exec", pod, "--", "printenv", "NODE"); err != nil || out != name+"\n" {
			t.Errorf("kubectl exec %s printenv NODE: %v %q, want %s", pod, err, out, name)
		}
		if out, err := kubectl("from stdin\n", "exec", "-i", pod, "--", "cat"); err != nil || out != "from stdin\n" {
			t.Errorf("kubectl exec -i %s cat: %v %q", pod, err, out)
		}
		if line, err := attachFirstLine(c, ns, pod); err != nil || !strings.HasPrefix(line, ns+"/"+pod+"/app line ") {
			t.Errorf("kubectl attach %s: %v %q", pod, err, line)
		}
		file := filepath.Join(local, pod+".txt")
		if err := os.WriteFile(file, []byte("copied to "+name+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if out, err := kubectl("", "cp", file, pod+":/tmp/notes.txt"); err != nil {
			t.Errorf("kubectl cp into %s: %v %s", pod, err, out)
		} else if out, err := kubectl("", "exec", pod, "--", "cat", "/tmp/notes.txt"); err != nil || out != "copied to "+name+"\n" {
			t.Errorf("file copied into %s: %v %q", pod, err, out)
		}
		want := "ping " + name + "\n"
		if echo, err := daemontest.PortForwardEcho(t, c, ns, pod, 8080, want); err != nil || echo != want {
			t.Errorf("port-forward to %s: %v %q", pod, err, echo)
		}

		// The node's own routes, through the API server's node proxy:
		// under /nodes/NAME on the shared listener.
		raw, err := kubectl("", "get", "--raw", "/api/v1/nodes/"+name+"/proxy/nodes/"+name+"/stats/summary")
		var summary statsv1alpha1.Summary
		if err != nil || json.Unmarshal([]byte(raw), &summary) != nil {
			t.Errorf("%s's stats/summary: %v %q", name, err, raw)
		} else if summary.Node.NodeName != name || len(summary.Pods) != 1 || summary.Pods[0].PodRef.Name != pod {
			t.Errorf("%s's stats/summary: node %s, pods %+v", name, summary.Node.NodeName, summary.Pods)
		}
	}
	// Without a node in its path a node route has no node to go to: the
	// answer says where the node routes are.
	if out, err := kubectl("", "get", "--raw", "/api/v1/nodes/"+names[0]+"/proxy/stats/summary"); err == nil || !strings.Contains(out, "NotFound") {
		t.Errorf("stats/summary without a node: %v %q, want 404", err, out)
	}

	// kubectl top: metrics-server found every node's resource metrics.
	daemontest.Eventually(t, "kubectl top pod shows every node's pod", func() (bool, string) {
		out, err := kubectl("", "top", "pod", "--no-headers")
		if err != nil {
			return false, out
		}
		top := columns(out)
		for i := range names {
			if top[fmt.Sprintf("web-%d", i)] != [2]string{fmt.Sprintf("%dm", 100*(i+1)), "64Mi"} {
				return false, out
			}
		}
		return len(top) == len(names), out
	})
	for _, name := range names {
		daemontest.Eventually(t, "kubectl top node "+name, func() (bool, string) {
			out, err := c.Kubectl(ctx, "top", "node", name, "--no-headers")
			f := strings.Fields(out)
			return err == nil && len(f) >= 4 && f[0] == name, out
		})
	}
	for _, line := range linesFrom(t, logFile, logStart) {
		if strings.Contains(line, d.Name+"-") && (strings.HasPrefix(line, "E") || strings.Contains(line, "Failed getting complete")) {
			t.Errorf("metrics-server: %s", line)
		}
	}
}

// kubectlIn runs the cluster's kubectl as admin in namespace ns, with
// stdin, for up to 30 s, and returns its combined output.
func kubectlIn(c *testcluster.Cluster, ns, stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := c.KubectlCommand(ctx, append([]string{"-n", ns}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// attachFirstLine runs kubectl attach to pod's container and returns the
// first line of its output.
func attachFirstLine(c *testcluster.Cluster, ns, pod string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := c.KubectlCommand(ctx, "-n", ns, "attach", pod, "-c", "app")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	defer func() { cancel(); _ = cmd.Wait() }()
	return bufio.NewReader(stdout).ReadString('\n')
}

// listeningPorts are the TCP ports process pid listens on: its sockets
// (/proc/PID/fd) in the listening state in its network namespace's tables.
func listeningPorts(t *testing.T, pid int) []int {
	t.Helper()
	fds, err := os.ReadDir(fmt.Sprintf("/proc/%d/fd", pid))
	if err != nil {
		t.Fatal(err)
	}
	inodes := map[string]bool{}
	for _, fd := range fds {
		target, err := os.Readlink(fmt.Sprintf("/proc/%d/fd/%s", pid, fd.Name()))
		if inode, ok := strings.CutPrefix(target, "socket:["); err == nil && ok {
			inodes[strings.TrimSuffix(inode, "]")] = true
		}
	}
	var ports []int
	for _, table := range []string{"tcp", "tcp6"} {
		raw, err := os.ReadFile(fmt.Sprintf("/proc/%d/net/%s", pid, table))
		if err != nil {
			t.Fatal(err)
		}
		// sl local_address rem_address st tx_queue:rx_queue tr:tm->when retrnsmt uid timeout inode
		for _, line := range strings.Split(string(raw), "\n")[1:] {
			f := strings.Fields(line)
			if len(f) < 10 || f[3] != "0A" || !inodes[f[9]] {
				continue
			}
			_, hexPort, _ := strings.Cut(f[1], ":")
			port, err := strconv.ParseInt(hexPort, 16, 32)
			if err != nil {
				t.Fatalf("/proc/%d/net/%s: %q", pid, table, line)
			}
			ports = append(ports, int(port))
		}
	}
	return ports
}
