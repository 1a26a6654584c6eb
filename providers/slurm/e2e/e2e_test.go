//go:build e2e

// Package e2e_test runs virtual-kubelet --provider slurm against a real
// control plane and a real Slurm: each test's node host (a network
// namespace the API server reaches) runs its own munged, slurmctld and
// slurmd on its loopback (hack/slurm/slurm.sh) and the daemon beside them.
package e2e_test

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/test/poll"
)

func TestMain(m *testing.M) { daemontest.Main(m) }

const timeout = 3 * time.Minute

func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	poll.Until(t, timeout, what, cond)
}

// slurmNode is a node host with a Slurm of its own and the provider's
// config for it.
type slurmNode struct {
	c      *testcluster.Cluster
	host   *nethost.Host
	name   string
	dir    string
	config string
}

// slurmScript is hack/slurm/slurm.sh of this checkout.
func slurmScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "hack", "slurm", "slurm.sh")
}

// The tenant users hack/slurm/slurm.sh install adds: the tests' pods run
// as them, never as root.
const (
	tenantA = "vk-tenant-a"
	tenantB = "vk-tenant-b"
)

// tenants is the provider config's tenants field: each user's namespaces.
type tenants map[string][]string

func (ts tenants) yaml() string {
	out := "tenants:\n"
	for _, user := range []string{tenantA, tenantB} {
		if len(ts[user]) > 0 {
			out += fmt.Sprintf("- {user: %s, namespaces: [%s], annotations: [constraint, nice]}\n", user, strings.Join(ts[user], ", "))
		}
	}
	return out
}

// newSlurmNode starts Slurm in a new node host (installing Debian's
// packages first when missing), with env added to hack/slurm/slurm.sh's
// environment, and writes the provider's config with the tenants given.
func newSlurmNode(t *testing.T, c *testcluster.Cluster, ts tenants, env ...string) *slurmNode {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("Slurm runs as root here")
	}
	// Installed from the root namespace: the node host reaches no mirror.
	if out, err := exec.Command(slurmScript(), "install").CombinedOutput(); err != nil {
		t.Fatalf("installing Slurm: %v\n%s", err, out)
	}
	n := &slurmNode{c: c, name: testcluster.UniqueName("vk-slurm")}
	n.host = c.AddHost(t, testcluster.UniqueName("h"))
	// The munge socket's path must stay short: a temp dir, not t.TempDir.
	var err error
	if n.dir, err = os.MkdirTemp("", "vk-slurm-e2e-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(n.dir) })
	start := n.host.Command(context.Background(), slurmScript(), "start", n.dir)
	start.Env = append(os.Environ(), env...)
	if out, err := start.CombinedOutput(); err != nil {
		logs, _ := exec.Command("tail", "-n", "20", filepath.Join(n.dir, "slurmctld.log"), filepath.Join(n.dir, "slurmd.log")).CombinedOutput()
		t.Fatalf("starting Slurm: %v\n%s\n%s", err, out, logs)
	}
	t.Cleanup(func() { _ = n.host.Command(context.Background(), slurmScript(), "stop", n.dir).Run() })
	n.config = filepath.Join(n.dir, "provider.yaml")
	cfg := fmt.Sprintf(`workDir: %s/work
slurmConf: %s/slurm.conf
pollInterval: 500ms
images:
  busybox: {host: true}
  python: {prefix: [python3, -c]}
capacity: {cpu: "8", memory: 16Gi, pods: "100"}
%s`, n.dir, n.dir, ts.yaml())
	if err := os.WriteFile(n.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// daemon is a running virtual-kubelet --provider slurm.
type daemon struct {
	*childproc.Process
	output *childproc.Output
}

// start runs the daemon for the node in its host; it is stopped when the
// test ends.
func (n *slurmNode) start(t *testing.T) *daemon {
	t.Helper()
	return n.startBinary(t, daemontest.Binary())
}

// startBinary is start with another virtual-kubelet binary.
func (n *slurmNode) startBinary(t *testing.T, binary string) *daemon {
	t.Helper()
	d := &daemon{output: &childproc.Output{}}
	addr := n.host.Addr.String()
	cmd := n.host.Command(context.Background(), binary, "--provider", "slurm", "--provider-config", n.config,
		"--nodename", n.name, "--kubeconfig", n.c.Info.NodeKubeconfig, "--node-ip", addr, "--listen-address", addr,
		"--metrics-addr", "", "--log-level", "debug")
	cmd.Stdout, cmd.Stderr = d.output, d.output
	var err error
	if d.Process, err = childproc.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !d.Exited() {
			d.Stop(20 * time.Second)
		}
		if t.Failed() {
			t.Logf("virtual-kubelet output:\n%s", d.output.String())
		}
	})
	return d
}

// slurm runs a Slurm command in the node's host.
func (n *slurmNode) slurm(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := n.host.Command(context.Background(), name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+filepath.Join(n.dir, "slurm.conf"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// jobComments lists the comments of all the jobs squeue shows, one per job.
func (n *slurmNode) jobComments(t *testing.T) []string {
	t.Helper()
	return strings.Fields(n.slurm(t, "squeue", "--noheader", "--all", "--states=all", "--format=%k"))
}

// runningNode is a Slurm node with its daemon started and Ready, and a
// namespace for the test's pods.
func runningNode(t *testing.T) (*slurmNode, *daemon, string) {
	t.Helper()
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	n := newSlurmNode(t, c, tenants{tenantA: {ns}})
	d := n.start(t)
	n.waitReady(t)
	return n, d, ns
}

func (n *slurmNode) waitReady(t *testing.T) {
	t.Helper()
	eventually(t, "node "+n.name+" Ready", func() (bool, string) {
		node, err := n.c.Client.CoreV1().Nodes().Get(context.Background(), n.name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range node.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, string(c.Status)
			}
		}
		return false, "no Ready condition"
	})
	t.Cleanup(func() {
		_ = n.c.Client.CoreV1().Nodes().Delete(context.Background(), n.name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
}

// pod is a pod for the node, tolerating its taint.
func (n *slurmNode) pod(ns, name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:      n.name,
			Containers:    containers,
			RestartPolicy: corev1.RestartPolicyNever,
			Tolerations:   []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}},
		},
	}
}

func (n *slurmNode) create(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := n.c.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

func (n *slurmNode) waitPod(t *testing.T, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	eventually(t, fmt.Sprintf("pod %s %s", name, what), func() (bool, string) {
		p, err := n.c.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return cond(p), fmt.Sprintf("phase=%s reason=%s %+v", p.Status.Phase, p.Status.Reason, p.Status.ContainerStatuses)
	})
	return pod
}

func (n *slurmNode) kubectl(t *testing.T, args ...string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := n.c.Kubectl(ctx, args...)
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return out
}

func running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

func shell(name, script string, args ...string) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox", Command: append([]string{"sh", "-c", script, "sh"}, args...)}
}
