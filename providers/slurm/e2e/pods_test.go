//go:build e2e

package e2e_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// greeter listens on 127.0.0.1:port in the job (the node host's loopback)
// and greets each connection with one line.
const greeter = `import socket, sys
s = socket.socket()
s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
s.bind(("127.0.0.1", int(sys.argv[1])))
s.listen()
while True:
    c, _ = s.accept()
    c.sendall(b"hello from the slurm job\n")
    c.close()
`

// TestPodsAsSlurmJobs drives a Slurm node through the API server: a pod with
// a ConfigMap volume, a Secret env and an init container runs as one job
// (squeue shows it); kubectl logs, exec and port-forward reach it; a pod
// exiting 3 ends Failed with exit code 3 and its shell metacharacters stayed
// literal; an image outside the table is rejected naming it; a pod over its
// deadline ends DeadlineExceeded; a graceful delete sends TERM first (the
// trap writes a file exec reads while the pod terminates) and a force delete
// cancels the job at once.
func TestPodsAsSlurmJobs(t *testing.T) {
	n, _, ns := slurmtest.RunningNode(t)
	c, ctx := n.C, context.Background()

	// Started first: Slurm enforces time limits in whole minutes.
	deadline := n.Pod(ns, "deadline", slurmtest.Shell("main", "while :; do sleep 1; done"))
	deadline.Spec.ActiveDeadlineSeconds = ptr.To[int64](20)
	n.Create(t, deadline)

	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "cfg"}, Data: map[string]string{"x": "from the configmap"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"token": "s3cret"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	main := slurmtest.Shell("main", `echo "token=$TOKEN"; cat /work/init
trap 'echo term > /work/term; sleep 3; exit 0' TERM
while :; do sleep 0.2; done`)
	main.Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
		LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "token"}}}}
	main.VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}, {Name: "work", MountPath: "/work"}}
	server := corev1.Container{Name: "server", Image: "python", Args: []string{greeter, "18080"}}
	web := n.Pod(ns, "web", main, server)
	web.Spec.InitContainers = []corev1.Container{slurmtest.Shell("init", "echo from-init > /work/init")}
	web.Spec.InitContainers[0].VolumeMounts = []corev1.VolumeMount{{Name: "work", MountPath: "/work"}}
	web.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "work", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	web.Spec.TerminationGracePeriodSeconds = ptr.To[int64](60)
	web = n.Create(t, web)
	n.WaitPod(t, ns, "web", "Running", daemontest.Running)

	if out := n.Slurm(t, "squeue", "--noheader", "--format=%k %T"); !strings.Contains(out, "vk-pod:"+string(web.UID)+" RUNNING") {
		t.Errorf("squeue does not show the pod's job running:\n%s", out)
	}
	slurmtest.Eventually(t, "kubectl logs", func() (bool, string) {
		out, _ := c.Kubectl(ctx, "-n", ns, "logs", "web", "-c", "main")
		return out == "token=s3cret\nfrom-init\n", out
	})
	if out := n.Kubectl(t, "-n", ns, "exec", "web", "-c", "main", "--", "cat", "/etc/cfg/x"); out != "from the configmap" {
		t.Errorf("kubectl exec cat /etc/cfg/x: %q", out)
	}
	slurmtest.Eventually(t, "the web pod's usage from sstat in the stats summary", func() (bool, string) {
		raw, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", n.Name, "proxy/stats/summary").DoRaw(ctx)
		if err != nil {
			return false, err.Error()
		}
		var summary statsv1alpha1.Summary
		if err := json.Unmarshal(raw, &summary); err != nil {
			return false, err.Error()
		}
		for _, ps := range summary.Pods {
			if ps.PodRef.UID == string(web.UID) {
				mem := ps.Memory.WorkingSetBytes
				return ps.CPU.UsageCoreNanoSeconds != nil && mem != nil && *mem > 1<<20, string(raw)
			}
		}
		return false, string(raw)
	})
	slurmtest.Eventually(t, "port-forward to the job's listener", func() (bool, string) {
		line, err := portForward(t, c, ns, "web", 18080)
		return line == "hello from the slurm job\n", fmt.Sprintf("%q %v", line, err)
	})

	attack := "$(touch /tmp/vk-slurm-e2e-pwned);`touch /tmp/vk-slurm-e2e-pwned`"
	n.Create(t, n.Pod(ns, "exit3", slurmtest.Shell("main", `echo "$1"; exit 3`, attack)))
	failed := n.WaitPod(t, ns, "exit3", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if s := failed.Status.ContainerStatuses; len(s) != 1 || s[0].State.Terminated == nil || s[0].State.Terminated.ExitCode != 3 {
		t.Errorf("exit3: container statuses %+v, want exit code 3", s)
	}
	if out := n.Kubectl(t, "-n", ns, "logs", "exit3"); out != attack+"\n" {
		t.Errorf("exit3 log %q, want the argument literally", out)
	}
	if _, err := os.Stat("/tmp/vk-slurm-e2e-pwned"); err == nil {
		t.Error("an argument ran as shell: /tmp/vk-slurm-e2e-pwned exists")
	}

	n.Create(t, n.Pod(ns, "badimage", corev1.Container{Name: "main", Image: "nginx"}))
	bad := n.WaitPod(t, ns, "badimage", "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if bad.Status.Reason != "ProviderRejected" || !strings.Contains(bad.Status.Message, `image "nginx"`) {
		t.Errorf("badimage: reason %q message %q, want ProviderRejected naming the image", bad.Status.Reason, bad.Status.Message)
	}

	// Graceful delete: TERM reaches the container, which writes a file
	// and keeps running for a while; the pod then goes.
	n.Kubectl(t, "-n", ns, "delete", "pod", "web", "--wait=false")
	slurmtest.Eventually(t, "the TERM trap's file", func() (bool, string) {
		out, err := c.Kubectl(ctx, "-n", ns, "exec", "web", "-c", "main", "--", "cat", "/work/term")
		return err == nil && out == "term\n", out
	})
	n.WaitGone(t, ns, "web")

	stubborn := n.Pod(ns, "stubborn", slurmtest.Shell("main", "trap '' TERM; while :; do sleep 0.2; done"))
	stubborn.Spec.TerminationGracePeriodSeconds = ptr.To[int64](600)
	stubborn = n.Create(t, stubborn)
	n.WaitPod(t, ns, "stubborn", "Running", daemontest.Running)
	n.Kubectl(t, "-n", ns, "delete", "pod", "stubborn", "--grace-period=0", "--force", "--wait=false")
	slurmtest.Eventually(t, "the force-deleted pod's job cancelled", func() (bool, string) {
		out := n.Slurm(t, "squeue", "--noheader", "--all", "--states=all", "--format=%k %T")
		return strings.Contains(out, "vk-pod:"+string(stubborn.UID)+" CANCELLED"), out
	})

	got := n.WaitPod(t, ns, "deadline", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if got.Status.Reason != "DeadlineExceeded" {
		t.Errorf("deadline pod: reason %q, want DeadlineExceeded", got.Status.Reason)
	}
}

// portForward runs kubectl port-forward to the pod's port and returns the
// first line read through it.
func portForward(t *testing.T, c *testcluster.Cluster, ns, pod string, port int) (string, error) {
	t.Helper()
	ctx, stop := context.WithTimeout(context.Background(), 30*time.Second)
	defer stop()
	pf := c.KubectlCommand(ctx, "-n", ns,
		"port-forward", "pod/"+pod, fmt.Sprintf(":%d", port))
	stdout, err := pf.StdoutPipe()
	if err != nil {
		return "", err
	}
	if err := pf.Start(); err != nil {
		return "", err
	}
	defer func() { stop(); _ = pf.Wait() }()
	// "Forwarding from 127.0.0.1:LOCAL -> PORT"
	first, err := bufio.NewReader(stdout).ReadString('\n')
	if err != nil {
		return "", fmt.Errorf("kubectl port-forward: %v", err)
	}
	var local int
	if _, err := fmt.Sscanf(first, "Forwarding from 127.0.0.1:%d", &local); err != nil {
		return "", fmt.Errorf("kubectl port-forward said %q", first)
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", local))
	if err != nil {
		return "", err
	}
	defer conn.Close()
	return bufio.NewReader(conn).ReadString('\n')
}
