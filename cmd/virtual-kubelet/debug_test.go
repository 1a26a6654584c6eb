package main_test

import (
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testcluster"
)

// TestKubectlDebug: kubectl debug -it adds an ephemeral container, the
// provider starts it, its status is written, and the session reaches the
// mock's shell.
func TestKubectlDebug(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	d := startDaemon(t, c, c.AddHost(t, testcluster.UniqueName("h")))
	waitNodeReady(t, c.Client, d.name)

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: corev1.PodSpec{NodeName: d.name, Tolerations: tolerate,
			Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c.Client, ns, "web", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	cctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	cmd := exec.CommandContext(cctx, filepath.Join(c.Info.BinDir, "kubectl"), "--kubeconfig", c.Info.Kubeconfig, "-n", ns,
		"debug", "-it", "web", "--image=busybox", "--container=dbg")
	cmd.Stdin = strings.NewReader("hostname\necho hello from debug\nexit 3\n")
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), "web\n") || !strings.Contains(string(out), "hello from debug\n") {
		t.Fatalf("kubectl debug -it: %v\n%s", err, out)
	}
	p := waitPod(t, c.Client, ns, "web", "debug container exited", func(p *corev1.Pod) bool {
		s := p.Status.EphemeralContainerStatuses
		return len(s) == 1 && s[0].Name == "dbg" && s[0].State.Terminated != nil
	})
	if code := p.Status.EphemeralContainerStatuses[0].State.Terminated.ExitCode; code != 3 || p.Status.Phase != corev1.PodRunning {
		t.Errorf("debug container exit code %d (want 3), pod %s", code, p.Status.Phase)
	}
	t.Logf("pod generation after kubectl debug: %d", p.Generation)
}
