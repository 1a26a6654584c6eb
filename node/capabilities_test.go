package node_test

import (
	"context"
	"io"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// logsOnly has the lifecycle and one capability, logs.
type logsOnly struct{ *testProvider }

func (logsOnly) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return io.NopCloser(nil), nil
}

func TestPodHandlerConfig(t *testing.T) {
	bare := node.CapabilitiesOf(newTestProvider()).PodHandlerConfig()
	if bare.GetPods == nil || bare.GetPod == nil {
		t.Error("the pod list and lookup are every provider's")
	}
	if bare.GetContainerLogs != nil || bare.RunInContainer != nil || bare.AttachToContainer != nil ||
		bare.PortForward != nil || bare.GetStatsSummary != nil || bare.GetMetricsResource != nil {
		t.Errorf("a provider with no capability got routes: %+v", bare)
	}
	logs := node.CapabilitiesOf(logsOnly{newTestProvider()}).PodHandlerConfig()
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

func TestPodHandlerConfigDeclarer(t *testing.T) {
	cfg := node.CapabilitiesOf(declaresLogs{logsOnly{newTestProvider()}}).PodHandlerConfig()
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

// TestPodHandlerConfigStats: a summary serves both stats routes (the
// resource metrics are written from it); families of the provider's own
// take the place of those.
func TestPodHandlerConfigStats(t *testing.T) {
	summary := node.CapabilitiesOf(summaryOnly{newTestProvider()}).PodHandlerConfig()
	if summary.GetStatsSummary == nil || summary.GetMetricsResource != nil {
		t.Errorf("summary only: summary %t, families %t", summary.GetStatsSummary != nil, summary.GetMetricsResource != nil)
	}
	both := node.CapabilitiesOf(withFamilies{summaryOnly{newTestProvider()}}).PodHandlerConfig()
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

func TestCopiesEnvObjects(t *testing.T) {
	if node.CapabilitiesOf(newTestProvider()).CopiesEnvObjects {
		t.Error("a provider that copies nothing gets references")
	}
	if node.CapabilitiesOf(copier{newTestProvider(), false}).CopiesEnvObjects {
		t.Error("a copier that says no gets references")
	}
	if !node.CapabilitiesOf(copier{newTestProvider(), true}).CopiesEnvObjects {
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

func TestNodeProviderFor(t *testing.T) {
	registered := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "vk", Labels: map[string]string{"type": "virtual-kubelet"}},
		Status:     corev1.NodeStatus{Capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("10")}},
	}
	if _, ok := node.CapabilitiesOf(newTestProvider()).NodeProviderFor(registered).(node.NaiveNodeProvider); !ok {
		t.Error("a provider that is no NodeProvider gets the naive one")
	}
	np := node.CapabilitiesOf(capacityProvider{newTestProvider(), corev1.ResourceList{corev1.ResourcePods: resource.MustParse("7")}}).NodeProviderFor(registered)
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

// everything has the methods of every optional capability.
type everything struct {
	*testProvider
	declarer
}

func (everything) NotifyPods(context.Context, func(*corev1.Pod))               {}
func (everything) Ping(context.Context) error                                  { return nil }
func (everything) NotifyNodeStatus(context.Context, func(*corev1.Node))        {}
func (everything) NotifyCapacity(context.Context, func(corev1.ResourceList))   {}
func (everything) NodeLabels() map[string]string                               { return nil }
func (everything) NodeTaints() []corev1.Taint                                  { return nil }
func (everything) CopiesEnvObjects() bool                                      { return true }
func (everything) AssignPodIPs(context.Context, *corev1.Pod) ([]string, error) { return nil, nil }
func (everything) PodNetworkReachable() bool                                   { return true }
func (everything) ReadsTokensOnRead() bool                                     { return true }
func (everything) GetContainerLogs(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
	return nil, nil
}
func (everything) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return nil
}
func (everything) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return nil
}
func (everything) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return nil
}
func (everything) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) { return nil, nil }
func (everything) GetMetricsResource(context.Context) ([]*dto.MetricFamily, error) { return nil, nil }
func (everything) SetPodVolumes(context.Context, *corev1.Pod, *volume.Contents) error {
	return nil
}
func (everything) KillContainer(context.Context, string, string, string, time.Duration) error {
	return nil
}
func (everything) ResizePod(context.Context, node.ResizeRequest) (node.ResizeResult, error) {
	return node.ResizeResult{}, nil
}

// declarer declares the capabilities in its set.
type declarer map[node.Capability]bool

func (d declarer) Declares(c node.Capability) bool { return d[c] }

// TestCapabilitiesOf: every optional interface a provider implements is
// found; a CapabilityDeclarer's undeclared ones are left out (volumes
// among them, so they cost nothing), while those it cannot leave out
// (pod status, node status and labels, IPs, env objects) stay.
func TestCapabilitiesOf(t *testing.T) {
	all := node.CapabilitiesOf(everything{newTestProvider(), declarer{
		node.CapabilityLogs: true, node.CapabilityExec: true, node.CapabilityAttach: true,
		node.CapabilityPortForward: true, node.CapabilityStats: true, node.CapabilityProbes: true,
		node.CapabilityKillContainer: true, node.CapabilityResize: true, node.CapabilityVolumes: true,
	}})
	for name, present := range capabilityFields(all) {
		if !present {
			t.Errorf("declared and implemented, %s is missing", name)
		}
	}
	none := node.CapabilitiesOf(everything{newTestProvider(), declarer{}})
	kept := map[string]bool{"Pods": true, "Notifier": true, "Node": true, "Capacity": true, "Decorator": true, "IPs": true, "CopiesEnvObjects": true}
	for name, present := range capabilityFields(none) {
		if present != kept[name] {
			t.Errorf("declaring nothing, %s present: %t, want %t", name, present, kept[name])
		}
	}
	bare := node.CapabilitiesOf(newTestProvider())
	for name, present := range capabilityFields(bare) {
		if present != (name == "Pods") {
			t.Errorf("a bare provider has %s: %t", name, present)
		}
	}
}

// capabilityFields says which of c's fields are set, by name.
func capabilityFields(c node.Capabilities) map[string]bool {
	return map[string]bool{
		"Pods": c.Pods != nil, "Notifier": c.Notifier != nil, "Node": c.Node != nil, "Capacity": c.Capacity != nil,
		"Decorator": c.Decorator != nil, "Logs": c.Logs != nil, "Exec": c.Exec != nil, "Attach": c.Attach != nil,
		"PortForward": c.PortForward != nil, "Stats": c.Stats != nil, "MetricsResource": c.MetricsResource != nil,
		"IPs": c.IPs != nil, "Volumes": c.Volumes != nil, "TokensOnRead": c.TokensOnRead,
		"CopiesEnvObjects": c.CopiesEnvObjects, "Probes": c.Probes != nil, "Killer": c.Killer != nil, "Resizer": c.Resizer != nil,
	}
}
