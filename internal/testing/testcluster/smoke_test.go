//go:build e2e

package testcluster_test

import (
	"context"
	"crypto/tls"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/retry"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// fakeNode registers a Node with no kubelet behind it, Ready, so the
// scheduler places pods on it.
func fakeNode(t *testing.T, c *testcluster.Cluster, addr string, port int32) *corev1.Node {
	t.Helper()
	ctx := context.Background()
	name := testcluster.UniqueName("smoke")
	n := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}},
	}
	n, err := c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	// The node lifecycle controller taints new nodes at once: retry on conflict.
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err = c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status = corev1.NodeStatus{
			Capacity:        capacity,
			Allocatable:     capacity,
			Conditions:      []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Smoke", LastHeartbeatTime: metav1.Now()}},
			Addresses:       []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}},
			DaemonEndpoints: corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}},
		}
		n, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// TestSchedulerAndControllersAct shows the control plane is whole: the
// deployment and replicaset controllers create pods and the scheduler binds
// them to the only node that fits.
func TestSchedulerAndControllersAct(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	node := fakeNode(t, c, "10.213.255.254", 10250)

	podLabels := map[string]string{"app": "smoke"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "smoke", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](3),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelHostname: node.Name},
					// The node lifecycle controller may not have removed
					// its not-ready taint yet.
					Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
					Containers:  []corev1.Container{{Name: "c", Image: "busybox"}},
				},
			},
		},
	}
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, d, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	err := wait.PollUntilContextTimeout(ctx, 200*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		rs, err := c.Client.AppsV1().ReplicaSets(ns).List(ctx, metav1.ListOptions{LabelSelector: labels.SelectorFromSet(podLabels).String()})
		if err != nil || len(rs.Items) != 1 {
			return false, err
		}
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err
		}
		bound := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == node.Name {
				bound++
			}
		}
		return bound == 3, nil
	})
	if err != nil {
		pods, _ := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		t.Fatalf("deployment did not get 3 pods bound to %s: %v (pods: %d)", node.Name, err, len(pods.Items))
	}
}

// TestPodBoundToNode creates a pod with spec.nodeName preset, the way a
// virtual node's pods look to its daemon, and reads it back by field selector.
func TestPodBoundToNode(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	node := fakeNode(t, c, "10.213.255.254", 10250)
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "bound", Namespace: ns},
		Spec: corev1.PodSpec{
			NodeName:   node.Name,
			Containers: []corev1.Container{{Name: "c", Image: "busybox"}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// The node is Ready and untainted, so the scheduler may place other
	// tests' pods on it too: only this test's namespace is looked at.
	pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{FieldSelector: "spec.nodeName=" + node.Name})
	if err != nil {
		t.Fatal(err)
	}
	if len(pods.Items) != 1 || pods.Items[0].Name != "bound" {
		t.Fatalf("pods on %s: got %d, want just %q", node.Name, len(pods.Items), "bound")
	}
}

// TestNodeHostIsProxied shows why node hosts exist: the apiserver proxies
// nodes/proxy to a server in a node host, but not to one on loopback.
func TestNodeHostIsProxied(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	host := c.AddHost(t, testcluster.UniqueName("smoke"))

	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host.Addr.String(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	l, err := host.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:   http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { _, _ = w.Write([]byte("hello from " + r.URL.Path)) }),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}},
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port

	node := fakeNode(t, c, host.Addr.String(), int32(port))
	body, err := c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", node.Name, "proxy", "healthz").DoRaw(ctx)
	if err != nil {
		t.Fatalf("nodes/proxy to node host %s: %v", host.Addr, err)
	}
	if got := string(body); got != "hello from /healthz" {
		t.Fatalf("nodes/proxy answered %q", got)
	}

	loop := fakeNode(t, c, "127.0.0.1", int32(port))
	body, err = c.Client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", loop.Name, "proxy", "healthz").DoRaw(ctx)
	if err == nil || !strings.Contains(string(body), "address not allowed") {
		t.Fatalf("nodes/proxy to loopback: got %v (%s), want 'address not allowed'", err, body)
	}
}
