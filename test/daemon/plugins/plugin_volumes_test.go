//go:build e2e

package plugins_test

import (
	"context"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
	"github.com/vkubelet/virtual-kubelet/plugin/providerserver"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/grpcplugin"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// withoutVolumes is the mock as a plugin that does not take pod volumes:
// its handshake declares no CAPABILITY_VOLUMES.
type withoutVolumes struct {
	node.Provider
	node.PodNotifier
}

// tokenRequests counts the TokenRequests (POST .../serviceaccounts/<sa>/token)
// a client sends.
type tokenRequests struct {
	next  http.RoundTripper
	count *atomic.Int64
}

var tokenRequestPath = regexp.MustCompile(`^/api/v1/namespaces/[^/]+/serviceaccounts/[^/]+/token$`)

func (c tokenRequests) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPost && tokenRequestPath.MatchString(req.URL.Path) {
		c.count.Add(1)
	}
	return c.next.RoundTrip(req)
}

// TestPluginWithoutVolumesRequestsNoToken: a pod with a projected
// service-account token runs on a node whose gRPC plugin did not declare
// volumes, and the node's client sends no TokenRequest for it. The
// control: the same pod on a node whose plugin takes volumes costs one.
func TestPluginWithoutVolumesRequestsNoToken(t *testing.T) {
	c := testcluster.Shared(t)
	for _, tc := range []struct {
		name    string
		plugin  func(node.Provider) node.Provider
		volumes bool
	}{
		{"without volumes", func(p node.Provider) node.Provider { return withoutVolumes{p, p.(node.PodNotifier)} }, false},
		{"with volumes", func(p node.Provider) node.Provider { return p }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ns, name := c.Namespace(t), testcluster.UniqueName("vk")
			p := servedPlugin(t, name, tc.plugin)
			if caps := node.CapabilitiesOf(p); (caps.Volumes != nil) != tc.volumes {
				t.Errorf("the daemon sees volumes %t, want %t", caps.Volumes != nil, tc.volumes)
			}
			var requests atomic.Int64
			cfg := rest.CopyConfig(c.Config)
			cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return tokenRequests{next: rt, count: &requests} })
			client, err := kubernetes.NewForConfig(cfg)
			if err != nil {
				t.Fatal(err)
			}
			runPluginNode(t, c, client, name, p)

			pod := daemontest.MockPod("tokened", name, corev1.RestartPolicyAlways, nil)
			pod.Spec.AutomountServiceAccountToken = ptr.To(false)
			pod.Spec.Volumes = []corev1.Volume{{Name: "token", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token", ExpirationSeconds: ptr.To[int64](3600)}}},
			}}}}
			pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "token", MountPath: "/var/run/token"}}
			daemontest.CreatePods(t, c.Client, ns, pod)
			// Volumes are resolved before CreatePod: once the pod runs,
			// any TokenRequest for it has been sent.
			daemontest.WaitPod(t, c.Client, ns, pod.Name, "Running", daemontest.Running)
			got := requests.Load()
			if !tc.volumes && got != 0 {
				t.Errorf("%d TokenRequests for a plugin that takes no volumes, want 0", got)
			}
			if tc.volumes && got == 0 {
				t.Error("no TokenRequest for a plugin that takes volumes: the count proves nothing")
			}
		})
	}
}

// servedPlugin serves the mock for node name, as plugin makes it, behind
// the gRPC boundary in this process until the test ends, and returns the
// daemon's side of it.
func servedPlugin(t *testing.T, name string, plugin func(node.Provider) node.Provider) node.Provider {
	t.Helper()
	m, err := mock.New(context.Background(), provider.InitConfig{NodeName: name, OperatingSystem: "linux"})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	p, err := grpcplugin.New(ctx, provider.InitConfig{ConfigPath: serveInProcess(t, plugin(m)), NodeName: name, OperatingSystem: "linux", InternalIP: "127.0.0.1", DaemonPort: 10250})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// serveInProcess serves p as a plugin on a unix socket in this process
// until the test ends, and returns the path of a --provider grpc config
// naming it.
func serveInProcess(t *testing.T, p node.Provider) string {
	t.Helper()
	// A unix socket's path has at most 107 bytes: not under t.TempDir.
	dir, err := os.MkdirTemp("", "vkplugin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	sock := filepath.Join(dir, "plugin.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- providerserver.Serve(ctx, lis, p) }()
	t.Cleanup(func() {
		cancel()
		if err := <-served; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	cfg := filepath.Join(dir, "grpc.yaml")
	if err := os.WriteFile(cfg, []byte("endpoint: unix://"+sock+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	return cfg
}

// runPluginNode runs node name in this process with provider p, talking
// to the API server through client, until the test ends.
func runPluginNode(t *testing.T, c *testcluster.Cluster, client kubernetes.Interface, name string, p node.Provider) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	spec := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"type": "virtual-kubelet"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{{Key: daemontest.Tolerate[0].Key, Value: "grpc", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity:    p.Capacity(ctx),
			Allocatable: p.Capacity(ctx),
			Conditions:  p.NodeConditions(ctx),
			Addresses:   p.NodeAddresses(ctx),
		},
	}
	n, err := nodeutil.New(nodeutil.Config{Client: client, Node: spec, Provider: p, Workers: 2})
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	go func() { _ = n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-n.Done()
		_ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, daemontest.DeleteNow)
	})
	if err := n.WaitReady(ctx, daemontest.Timeout); err != nil {
		t.Fatal(err)
	}
}
