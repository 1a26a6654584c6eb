//go:build e2e

package kubectl_test

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// TestExecEndsCleanlyOnShutdown: a kubectl exec running when the daemon is
// stopped (SIGTERM) ends with the session's status (the mock's sleep
// exits 130 when its session is cut short), not with the connection
// dropped under it ("websocket: close 1006 (abnormal closure): unexpected
// EOF"), as when the daemon exited without waiting for its sessions.
func TestExecEndsCleanlyOnShutdown(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	d := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")))
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "sleeper"},
		Spec: corev1.PodSpec{NodeName: d.Name, Tolerations: daemontest.Tolerate,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitPod(t, c.Client, ns, pod.Name, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	type result struct {
		out string
		err error
	}
	exec := make(chan result, 1)
	go func() {
		out, err := kubectlIn(c, ns, "", "exec", pod.Name, "--", "sleep", "600")
		exec <- result{out, err}
	}()
	// The session is up once the daemon has run the command for a while.
	select {
	case r := <-exec:
		t.Fatalf("kubectl exec ended before the shutdown: %v\n%s", r.err, r.out)
	case <-time.After(5 * time.Second):
	}
	if code, took := d.Shutdown(t); code != 0 {
		t.Errorf("the daemon exited with %d after %s", code, took)
	}
	select {
	case r := <-exec:
		if strings.Contains(r.out, "1006") || strings.Contains(r.out, "unexpected EOF") {
			t.Fatalf("the session was dropped without a close: %v\n%s", r.err, r.out)
		}
		if r.err == nil || !strings.Contains(r.out, "exit code 130") {
			t.Errorf("kubectl exec: %v\n%s\nwant the session's status, exit code 130", r.err, r.out)
		}
	case <-time.After(25 * time.Second):
		t.Fatal("kubectl exec did not end after the daemon stopped")
	}
}
