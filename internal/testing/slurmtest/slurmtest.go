// Package slurmtest runs virtual-kubelet --provider slurm for end-to-end
// tests against a real control plane and a real Slurm: each test's node
// host (a network namespace the API server reaches) runs its own munged,
// slurmctld and slurmd on its loopback (hack/slurm/slurm.sh) and the
// daemon beside them. It holds what the Slurm e2e packages
// (providers/slurm/e2e/...) share.
package slurmtest

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// Timeout bounds each wait of Eventually and Node.WaitPod: longer than
// daemontest's, since a pod's start goes through Slurm's scheduler.
const Timeout = 3 * time.Minute

// Eventually polls cond until it holds, failing the test after Timeout
// with what and cond's last message.
func Eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	daemontest.EventuallyWithin(t, Timeout, what, cond)
}

// Node is a node host with a Slurm of its own and the provider's config
// for it.
type Node struct {
	C      *testcluster.Cluster
	Host   *nethost.Host
	Name   string // the Node's name
	Dir    string // Slurm's state, its slurm.conf and the provider's config
	Config string // the provider's config file
}

// script is hack/slurm/slurm.sh of this checkout.
func script() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "..", "hack", "slurm", "slurm.sh")
}

// The tenant users hack/slurm/slurm.sh install adds: the tests' pods run
// as them, never as root.
const (
	TenantA = "vk-tenant-a"
	TenantB = "vk-tenant-b"
)

// Tenants is the provider config's tenants field: each user's namespaces.
type Tenants map[string][]string

// YAML is the provider config's tenants field.
func (ts Tenants) YAML() string {
	out := "tenants:\n"
	for _, user := range []string{TenantA, TenantB} {
		if len(ts[user]) > 0 {
			out += fmt.Sprintf("- {user: %s, namespaces: [%s], annotations: [constraint, nice]}\n", user, strings.Join(ts[user], ", "))
		}
	}
	return out
}

// NewNode starts Slurm in a new node host (installing Debian's packages
// first when missing), with env added to hack/slurm/slurm.sh's
// environment, and writes the provider's config with the tenants given.
func NewNode(t *testing.T, c *testcluster.Cluster, ts Tenants, env ...string) *Node {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("Slurm runs as root here")
	}
	// Installed from the root namespace: the node host reaches no mirror.
	if out, err := exec.Command(script(), "install").CombinedOutput(); err != nil {
		t.Fatalf("installing Slurm: %v\n%s", err, out)
	}
	n := &Node{C: c, Name: testcluster.UniqueName("vk-slurm")}
	n.Host = c.AddHost(t, testcluster.UniqueName("h"))
	// The munge socket's path must stay short: a temp dir, not t.TempDir.
	var err error
	if n.Dir, err = os.MkdirTemp("", "vk-slurm-e2e-"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(n.Dir) })
	start := n.Script(context.Background(), "start", n.Dir)
	start.Env = append(os.Environ(), env...)
	if out, err := start.CombinedOutput(); err != nil {
		logs, _ := exec.Command("tail", "-n", "20", filepath.Join(n.Dir, "slurmctld.log"), filepath.Join(n.Dir, "slurmd.log")).CombinedOutput()
		t.Fatalf("starting Slurm: %v\n%s\n%s", err, out, logs)
	}
	t.Cleanup(func() { _ = n.Script(context.Background(), "stop", n.Dir).Run() })
	n.Config = filepath.Join(n.Dir, "provider.yaml")
	cfg := fmt.Sprintf(`workDir: %s/work
slurmConf: %s/slurm.conf
pollInterval: 500ms
images:
  busybox: {host: true}
  python: {prefix: [python3, -c]}
capacity: {cpu: "8", memory: 16Gi, pods: "100"}
%s`, n.Dir, n.Dir, ts.YAML())
	if err := os.WriteFile(n.Config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	return n
}

// Script is hack/slurm/slurm.sh with args, to run in the node's host:
// "start" with n.Dir starts its Slurm again after a test stopped part of it.
func (n *Node) Script(ctx context.Context, args ...string) *exec.Cmd {
	return n.Host.Command(ctx, script(), args...)
}

// Daemon is a running virtual-kubelet --provider slurm.
type Daemon struct {
	*childproc.Process
	Output *childproc.Output // its stdout and stderr
}

// Start runs the daemon for the node in its host; it is stopped when the
// test ends.
func (n *Node) Start(t *testing.T) *Daemon {
	t.Helper()
	return n.StartBinary(t, daemontest.Binary())
}

// StartBinary is Start with another virtual-kubelet binary; extra flags
// come last and win.
func (n *Node) StartBinary(t *testing.T, binary string, extra ...string) *Daemon {
	t.Helper()
	d := &Daemon{Output: &childproc.Output{}}
	addr := n.Host.Addr.String()
	cmd := n.Host.Command(context.Background(), binary, append([]string{"--provider", "slurm", "--provider-config", n.Config,
		"--nodename", n.Name, "--kubeconfig", n.C.Info.NodeKubeconfig, "--node-ip", addr, "--listen-address", addr,
		"--metrics-addr", "", "--log-level", "debug"}, extra...)...)
	cmd.Stdout, cmd.Stderr = d.Output, d.Output
	var err error
	if d.Process, err = childproc.Start(cmd); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if !d.Exited() {
			d.Stop(20 * time.Second)
		}
		if t.Failed() {
			t.Logf("virtual-kubelet output:\n%s", d.Output.String())
		}
	})
	return d
}

// Slurm runs a Slurm command in the node's host, failing the test when it
// fails.
func (n *Node) Slurm(t *testing.T, name string, args ...string) string {
	t.Helper()
	cmd := n.Host.Command(context.Background(), name, args...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+filepath.Join(n.Dir, "slurm.conf"))
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s %v: %v\n%s", name, args, err, out)
	}
	return string(out)
}

// JobComments lists the comments of all the jobs squeue shows, one per job.
func (n *Node) JobComments(t *testing.T) []string {
	t.Helper()
	return strings.Fields(n.Slurm(t, "squeue", "--noheader", "--all", "--states=all", "--format=%k"))
}

// RunningNode is a Slurm node with its daemon started and Ready, and a
// namespace for the test's pods, which run as TenantA.
func RunningNode(t *testing.T) (*Node, *Daemon, string) {
	t.Helper()
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	n := NewNode(t, c, Tenants{TenantA: {ns}})
	d := n.Start(t)
	n.WaitReady(t)
	return n, d, ns
}

// WaitReady waits until the node is Ready; its Node is deleted when the
// test ends.
func (n *Node) WaitReady(t *testing.T) {
	t.Helper()
	Eventually(t, "node "+n.Name+" Ready", func() (bool, string) {
		node, err := n.C.Client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
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
		_ = n.C.Client.CoreV1().Nodes().Delete(context.Background(), n.Name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
	})
}

// Pod is a pod for the node, tolerating its taint, never restarted.
func (n *Node) Pod(ns, name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:      n.Name,
			Containers:    containers,
			RestartPolicy: corev1.RestartPolicyNever,
			Tolerations:   []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}},
		},
	}
}

// Create creates the pod, failing the test when that fails.
func (n *Node) Create(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := n.C.Client.CoreV1().Pods(pod.Namespace).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return got
}

// WaitPod waits until cond holds for the pod ns/name and returns it; what
// names the state waited for.
func (n *Node) WaitPod(t *testing.T, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	return poll.Pod(t, n.C.Client, Timeout, ns, name, what, cond)
}

// WaitGone waits until the pod ns/name no longer exists.
func (n *Node) WaitGone(t *testing.T, ns, name string) {
	t.Helper()
	Eventually(t, "pod "+name+" gone", func() (bool, string) {
		_, err := n.C.Client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// Kubectl runs the cluster's kubectl as admin and returns its output,
// failing the test when it fails.
func (n *Node) Kubectl(t *testing.T, args ...string) string {
	t.Helper()
	return daemontest.Kubectl(t, n.C, args...)
}

// Shell is a busybox container running script with sh -c, args its $1...
func Shell(name, script string, args ...string) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox", Command: append([]string{"sh", "-c", script, "sh"}, args...)}
}

// TenantCredential runs a process as a tenant user.
func TenantCredential(t *testing.T, name string) *syscall.Credential {
	t.Helper()
	u, err := user.Lookup(name)
	if err != nil {
		t.Fatalf("tenant user %s: %v", name, err)
	}
	uid, _ := strconv.ParseUint(u.Uid, 10, 32)
	gid, _ := strconv.ParseUint(u.Gid, 10, 32)
	return &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid), Groups: []uint32{uint32(gid)}}
}

// AsUser is setpriv's arguments that run the rest of its command line as
// a tenant user: entering the node host's network namespace needs root,
// so the host's command drops to the user itself.
func AsUser(t *testing.T, name string) []string {
	t.Helper()
	c := TenantCredential(t, name)
	return []string{fmt.Sprintf("--reuid=%d", c.Uid), fmt.Sprintf("--regid=%d", c.Gid), "--clear-groups", "--"}
}
