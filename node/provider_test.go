package node_test

import (
	"context"
	"io"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/api"
)

// logsOnly has the lifecycle and one capability, logs.
type logsOnly struct{ *testProvider }

func (logsOnly) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return io.NopCloser(nil), nil
}

func TestPodHandlerConfigOf(t *testing.T) {
	bare := node.PodHandlerConfigOf(newTestProvider())
	if bare.GetPods == nil || bare.GetPod == nil {
		t.Error("the pod list and lookup are every provider's")
	}
	if bare.GetContainerLogs != nil || bare.RunInContainer != nil || bare.AttachToContainer != nil ||
		bare.PortForward != nil || bare.GetStatsSummary != nil || bare.GetMetricsResource != nil {
		t.Errorf("a provider with no capability got routes: %+v", bare)
	}
	logs := node.PodHandlerConfigOf(logsOnly{newTestProvider()})
	if logs.GetContainerLogs == nil {
		t.Error("a LogsProvider's logs are not routed")
	}
	if logs.RunInContainer != nil || logs.PortForward != nil {
		t.Error("capabilities the provider lacks are routed")
	}
}

// declaresLogs has the methods of logs and exec but declares only logs.
type declaresLogs struct{ logsOnly }

func (declaresLogs) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return nil
}

func (declaresLogs) Declares(c node.Capability) bool { return c == node.CapabilityLogs }

func TestPodHandlerConfigOfDeclarer(t *testing.T) {
	cfg := node.PodHandlerConfigOf(declaresLogs{logsOnly{newTestProvider()}})
	if cfg.GetContainerLogs == nil {
		t.Error("a declared capability is not routed")
	}
	if cfg.RunInContainer != nil {
		t.Error("a capability the provider has but does not declare is routed")
	}
}

// summaryOnly has a stats summary; withFamilies has metric families too.
type summaryOnly struct{ *testProvider }

func (summaryOnly) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	return &statsv1alpha1.Summary{}, nil
}

type withFamilies struct{ summaryOnly }

func (withFamilies) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) { return nil, nil }

// TestPodHandlerConfigOfStats: a summary serves both stats routes (the
// resource metrics are written from it); families of the provider's own
// take the place of those.
func TestPodHandlerConfigOfStats(t *testing.T) {
	summary := node.PodHandlerConfigOf(summaryOnly{newTestProvider()})
	if summary.GetStatsSummary == nil || summary.GetMetricsResource != nil {
		t.Errorf("summary only: summary %t, families %t", summary.GetStatsSummary != nil, summary.GetMetricsResource != nil)
	}
	both := node.PodHandlerConfigOf(withFamilies{summaryOnly{newTestProvider()}})
	if both.GetStatsSummary == nil || both.GetMetricsResource == nil {
		t.Errorf("with families: summary %t, families %t", both.GetStatsSummary != nil, both.GetMetricsResource != nil)
	}
}

// copier copies env objects when on says so.
type copier struct {
	*testProvider
	on bool
}

func (c copier) CopiesEnvObjects() bool { return c.on }

func TestKeepsEnvObjectRefs(t *testing.T) {
	if node.KeepsEnvObjectRefs(newTestProvider()) {
		t.Error("a provider that copies nothing gets references")
	}
	if node.KeepsEnvObjectRefs(copier{newTestProvider(), false}) {
		t.Error("a copier that says no gets references")
	}
	if !node.KeepsEnvObjectRefs(copier{newTestProvider(), true}) {
		t.Error("a copier gets resolved values")
	}
}

// capacityProvider reports one new capacity.
type capacityProvider struct {
	*testProvider
	capacity corev1.ResourceList
}

func (c capacityProvider) NotifyCapacity(_ context.Context, f func(corev1.ResourceList)) {
	f(c.capacity)
}

func TestNodeProviderOf(t *testing.T) {
	registered := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "vk", Labels: map[string]string{"type": "virtual-kubelet"}},
		Status:     corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
	}
	if _, ok := node.NodeProviderOf(newTestProvider(), registered).(node.NaiveNodeProvider); !ok {
		t.Error("a provider that is no NodeProvider gets the naive one")
	}
	np := node.NodeProviderOf(capacityProvider{newTestProvider(), corev1.ResourceList{corev1.ResourcePods: resource.MustParse("7")}}, registered)
	var got *corev1.Node
	np.NotifyNodeStatus(context.Background(), func(n *corev1.Node) { got = n })
	if got == nil || got.Name != "vk" || got.Labels["type"] != "virtual-kubelet" ||
		got.Status.Capacity.Pods().Value() != 7 || got.Status.Allocatable.Pods().Value() != 7 {
		t.Errorf("reported node: %+v", got)
	}
	if registered.Status.Capacity.Pods().Value() != 10 {
		t.Error("the registered node was modified")
	}
}
