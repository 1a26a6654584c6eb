//go:build e2e

package plugins_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// TestPluginRestartLosesNothing: the mock behind the gRPC boundary, with a
// state directory, is killed and started again while the daemon runs. The
// daemon notices the outage (its Ping fails), a pod created meanwhile runs
// once the plugin is back, and the pods from before are the same pods:
// nothing created twice, nothing restarted. VK_PLUGIN_RESTART_PODS sizes
// it (20 by default; the 300 passes too, see the report).
func TestPluginRestartLosesNothing(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	name := testcluster.UniqueName("vk")
	cfg := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{%q: {"stateDir": %q}}`, name, filepath.Join(t.TempDir(), "state"))), 0o600); err != nil {
		t.Fatal(err)
	}
	d, p := daemontest.StartWithPlugin(t, c, nil, "--nodename", name, "--provider-config", cfg)
	daemontest.WaitNodeReady(t, c.Client, d.Name)

	n := daemontest.FloodSize(t, "VK_PLUGIN_RESTART_PODS", 20)
	create := func(name string) {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec: corev1.PodSpec{NodeName: d.Name, Tolerations: daemontest.Tolerate,
				Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	running := func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].State.Running != nil
	}
	before := map[string]*corev1.Pod{}
	for i := range n {
		create(fmt.Sprintf("p%d", i))
	}
	for i := range n {
		name := fmt.Sprintf("p%d", i)
		before[name] = daemontest.WaitPod(t, c.Client, ns, name, "Running", running)
	}

	p.Kill()
	<-p.Done()
	create("during")
	daemontest.Eventually(t, "the daemon sees the outage (Ping fails)", func() (bool, string) {
		return strings.Contains(d.Output.String(), "provider ping failed"), "no failed ping in the daemon's log yet"
	})
	p.Restart(t)
	restarted := time.Now()

	daemontest.WaitPod(t, c.Client, ns, "during", "Running once the plugin is back", running)
	for name, old := range before {
		now := daemontest.WaitPod(t, c.Client, ns, name, "still Running", running)
		was, is := old.Status.ContainerStatuses[0], now.Status.ContainerStatuses[0]
		if now.UID != old.UID || is.RestartCount != 0 || !is.State.Running.StartedAt.Equal(&was.State.Running.StartedAt) || now.Status.PodIP != old.Status.PodIP {
			t.Errorf("pod %s changed across the plugin restart: started %v → %v, restarts %d, IP %s → %s",
				name, was.State.Running.StartedAt, is.State.Running.StartedAt, is.RestartCount, old.Status.PodIP, now.Status.PodIP)
		}
	}
	t.Logf("%d pods from before the restart unchanged, the one created during the outage Running, %s after the plugin restarted", n, time.Since(restarted).Round(time.Millisecond))
	if got := strings.Count(p.Output.String(), "serving provider mock"); got != 2 {
		t.Errorf("the plugin started %d times, want 2", got)
	}

	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "pods gone", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items))
	})
	for _, out := range []string{d.Output.String(), p.Output.String()} {
		if strings.Contains(out, "panic") || strings.Contains(out, "DATA RACE") {
			t.Errorf("panic or race in the output:\n%s", out)
		}
	}
}
