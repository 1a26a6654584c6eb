//go:build e2e

package managed_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/commands"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node/api"
)

// TestManagedNodesShareOneListener: managed Nodes behind
// --kubelet-listener shared get the listener's annotation, applied under
// a field manager of its own that owns nothing else, their endpoint is
// the one port, pod and node routes reach them through the API server,
// and the annotation is taken off again when the daemon stops, the
// creator's annotations staying as they were.
func TestManagedNodesShareOneListener(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	pool := testcluster.UniqueName("karpsh")
	names := createKarpenterNodes(t, c, pool, 3)
	host := c.AddHost(t, testcluster.UniqueName("h"))
	const port = 10250
	d := daemontest.Start(t, c, host, append(managedFlags(pool), "--listen-port", fmt.Sprint(port), "--kubelet-listener", "shared", "--nodename", pool+"-vk")...)

	for _, name := range names {
		daemontest.WaitNodeReady(t, c.Client, name)
		var n *corev1.Node
		want := api.NodeRoutesPrefix(name) + api.MetricsResourceRouteSuffix
		daemontest.Eventually(t, name+": the shared listener's annotation", func() (bool, string) {
			var err error
			if n, err = c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{}); err != nil {
				return false, err.Error()
			}
			return n.Annotations[api.ResourceMetricsPathAnnotation] == want, fmt.Sprint(n.Annotations)
		})
		if n.Annotations[kwokKey] != kwokValue {
			t.Errorf("%s: annotations %v: the creator's must stay", name, n.Annotations)
		}
		if got := n.Status.DaemonEndpoints.KubeletEndpoint.Port; got != port {
			t.Errorf("%s: kubelet endpoint port %d, want the shared listener's %d", name, got, port)
		}
		owned := ""
		for _, f := range n.ManagedFields {
			if f.Manager == commands.ListenerFieldManager {
				owned += f.FieldsV1.String()
			}
		}
		if !strings.Contains(owned, api.ResourceMetricsPathAnnotation) || strings.Contains(owned, kwokKey) || strings.Contains(owned, "f:status") || strings.Contains(owned, "f:labels") {
			t.Errorf("%s: %s owns %s; want the listener's annotation alone", name, commands.ListenerFieldManager, owned)
		}
		register(t, c, name, pool)
	}

	// A pod route (logs) and a node route, through the API server, to the
	// one listener.
	pod := daemontest.MockPod("on-shared", names[1], corev1.RestartPolicyAlways, nil)
	daemontest.CreatePods(t, c.Client, ns, pod)
	daemontest.WaitPod(t, c.Client, ns, pod.Name, "Running", daemontest.Running)
	daemontest.Kubectl(t, c, "logs", "-n", ns, pod.Name)
	if out := daemontest.Kubectl(t, c, "get", "--raw", "/api/v1/nodes/"+names[1]+"/proxy"+api.NodeRoutesPrefix(names[1])+"/pods"); !strings.Contains(out, `"`+pod.Name+`"`) {
		t.Errorf("%s's /pods through the shared listener does not list %s: %.300s", names[1], pod.Name, out)
	}
	if out := daemontest.Kubectl(t, c, "get", "--raw", "/api/v1/nodes/"+names[0]+"/proxy"+api.NodeRoutesPrefix(names[0])+"/pods"); strings.Contains(out, `"`+pod.Name+`"`) {
		t.Errorf("%s's /pods lists %s, a pod of %s", names[0], pod.Name, names[1])
	}
	daemontest.CheckNoPanic(t, d)

	// Stopping takes the annotation off, and only it.
	if code, _ := d.Shutdown(t); code != 0 {
		t.Errorf("daemon exited %d", code)
	}
	for _, name := range names {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := n.Annotations[api.ResourceMetricsPathAnnotation]; ok || n.Annotations[kwokKey] != kwokValue {
			t.Errorf("%s after the daemon stopped: annotations %v, want the creator's alone", name, n.Annotations)
		}
		for _, f := range n.ManagedFields {
			if f.Manager == commands.ListenerFieldManager {
				t.Errorf("%s after the daemon stopped: %s still owns %s", name, f.Manager, f.FieldsV1.String())
			}
		}
	}
}
