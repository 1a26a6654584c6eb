package nodeutil_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

// fullProvider adds the kubelet API methods to nopProvider.
type fullProvider struct{ nopProvider }

func (fullProvider) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return nil, nil
}
func (fullProvider) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return nil
}
func (fullProvider) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return nil
}
func (fullProvider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) { return nil, nil }
func (fullProvider) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) { return nil, nil }
func (fullProvider) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return nil
}

func TestNewNodeRunsWithTheProviderItBuilds(t *testing.T) {
	client := fake.NewClientset()
	var got nodeutil.ProviderConfig
	n, err := nodeutil.NewNode("vk-unit", func(cfg nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		got = cfg
		return fullProvider{}, nil, nil
	}, nodeutil.WithClient(client), nodeutil.AttachProviderRoutes(http.NewServeMux()),
		func(c *nodeutil.NodeConfig) error { c.HTTPListenAddr = ""; return nil })
	if err != nil {
		t.Fatal(err)
	}
	if got.Pods == nil || got.ConfigMaps == nil || got.Secrets == nil || got.Services == nil || got.Node == nil || got.Node.Name != "vk-unit" {
		t.Fatalf("provider config incomplete: %+v", got)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = n.Run(ctx) }()
	if err := n.WaitReady(ctx, 30*time.Second); err != nil {
		t.Fatal(err)
	}
	// What the provider set is registered: checked against a real API
	// server in hack/port-provider's e2e (the fake clientset does not apply).
	if _, err := client.CoreV1().Nodes().Get(ctx, "vk-unit", metav1.GetOptions{}); err != nil {
		t.Errorf("node not registered: %v", err)
	}
	if n.PodController() == nil || n.NodeController() == nil {
		t.Error("controllers not exposed")
	}
	cancel()
	<-n.Done()
	if err := n.WaitReady(context.Background(), time.Second); err != nil {
		t.Errorf("WaitReady after a clean stop of a ready node: %v", err)
	}
}

func TestNewNodeRefusesBadInput(t *testing.T) {
	newProvider := func(nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		return fullProvider{}, nil, nil
	}
	client := nodeutil.WithClient(fake.NewClientset())
	for _, tc := range []struct {
		name string
		node string
		opts []nodeutil.NodeOpt
		want string
	}{
		{"no name", "", []nodeutil.NodeOpt{client}, "node name is required"},
		{"handler without TLS", "vk", []nodeutil.NodeOpt{client, nodeutil.AttachProviderRoutes(http.NewServeMux())}, "TLSConfig"},
		{"missing key pair", "vk", []nodeutil.NodeOpt{client, nodeutil.WithTLSConfig(nodeutil.WithKeyPairFromPath("/nonexistent/cert", "/nonexistent/key"))}, "/nonexistent/cert"},
		{"CA without PEM", "vk", []nodeutil.NodeOpt{client, nodeutil.WithTLSConfig(nodeutil.WithCACert([]byte("junk")))}, "no PEM certificate"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := nodeutil.NewNode(tc.node, newProvider, tc.opts...)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err = %v, want one mentioning %q", err, tc.want)
			}
		})
	}
}
