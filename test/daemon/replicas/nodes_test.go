//go:build e2e

package replicas_test

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

// TestManyNodesFromOneProcess runs three nodes from one daemon: each is
// Ready with its own lease, capacity from a name pattern, and a kubelet API
// on a port of its own that the API server reaches (logs and exec through
// it), and each runs only the pods bound to it.
func TestManyNodesFromOneProcess(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	host := c.AddHost(t, testcluster.UniqueName("h"))
	prefix := testcluster.UniqueName("vkm")
	cfg := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{%q: {"cpu": "3", "pods": "30"}}`, prefix+"-*")), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.Start(t, c, host, "--nodename", prefix, "--node-count", "3", "--listen-port", "10300", "--provider-config", cfg)

	ns := c.Namespace(t)
	conf := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "conf", Namespace: ns}, Data: map[string]string{"k": "one"}}
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, conf, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		name := fmt.Sprintf("%s-%d", prefix, i)
		n := daemontest.WaitNodeReady(t, c.Client, name)
		if port := n.Status.DaemonEndpoints.KubeletEndpoint.Port; port != int32(10300+i) {
			t.Errorf("%s: kubelet endpoint port %d, want %d", name, port, 10300+i)
		}
		if n.Status.Capacity.Cpu().String() != "3" || n.Labels["kubernetes.io/hostname"] != name {
			t.Errorf("%s: capacity %v labels %v", name, n.Status.Capacity, n.Labels)
		}
		daemontest.Eventually(t, name+": lease", func() (bool, string) {
			_, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
			return err == nil, fmt.Sprint(err)
		})
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("p%d", i), Namespace: ns},
			Spec: corev1.PodSpec{
				NodeName: name,
				Containers: []corev1.Container{{Name: "app", Image: "busybox", Env: []corev1.EnvVar{{Name: "NODE", Value: name}},
					VolumeMounts: []corev1.VolumeMount{{Name: "conf", MountPath: "/etc/conf"}}}},
				Volumes: []corev1.Volume{{Name: "conf", VolumeSource: corev1.VolumeSource{
					ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "conf"}}}}},
				Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			},
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 3 {
		name := fmt.Sprintf("p%d", i)
		daemontest.WaitPod(t, c.Client, ns, name, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
		// Through the API server to this pod's node's own port.
		if out := daemontest.Kubectl(t, c, "-n", ns, "exec", name, "--", "printenv", "NODE"); strings.TrimSpace(out) != fmt.Sprintf("%s-%d", prefix, i) {
			t.Errorf("%s: exec printed %q", name, out)
		}
		daemontest.Eventually(t, name+": a log line", func() (bool, string) {
			out, err := c.Kubectl(ctx, "-n", ns, "logs", name)
			return err == nil && strings.Contains(out, ns+"/"+name+"/app line"), fmt.Sprint(out, err)
		})
	}
	// A ConfigMap change reaches the volumes on every node (the nodes'
	// handlers share one on the ConfigMap informer).
	conf.Data["k"] = "two"
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Update(ctx, conf, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for i := range 3 {
		name := fmt.Sprintf("p%d", i)
		daemontest.Eventually(t, name+": the ConfigMap's new value in its volume", func() (bool, string) {
			out, err := c.Kubectl(ctx, "-n", ns, "exec", name, "--", "cat", "/etc/conf/k")
			return err == nil && strings.TrimSpace(out) == "two", fmt.Sprint(out, err)
		})
	}
	// Each node's kubelet API lists its own pods only.
	if out := daemontest.Kubectl(t, c, "get", "--raw", fmt.Sprintf("/api/v1/nodes/%s-1/proxy/pods", prefix)); !strings.Contains(out, `"p1"`) || strings.Contains(out, `"p0"`) || strings.Contains(out, `"p2"`) {
		t.Errorf("node 1's /pods: %s", out)
	}
	// A deleted Node comes back at once (the nodes share one watch of
	// their Nodes), well before its next status update would notice.
	deleted := prefix + "-2"
	before, err := c.Client.CoreV1().Nodes().Get(ctx, deleted, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Nodes().Delete(ctx, deleted, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.EventuallyWithin(t, 20*time.Second, deleted+": registered again", func() (bool, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, deleted, metav1.GetOptions{})
		return err == nil && n.UID != before.UID, fmt.Sprint(err)
	})
	if code, _ := d.Shutdown(t); code != 0 {
		t.Errorf("exit code %d", code)
	}
	if out := d.Output.String(); strings.Contains(out, "panic") || strings.Contains(out, "DATA RACE") {
		t.Errorf("daemon output has a panic or race:\n%s", out)
	}
}
