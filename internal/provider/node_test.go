package provider

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node"
)

func TestNodeBasics(t *testing.T) {
	ctx := context.Background()
	b := NodeBasicsFrom(InitConfig{OperatingSystem: "linux", InternalIP: "10.213.0.2", DaemonPort: 10250})
	if a := b.NodeAddresses(ctx); len(a) != 1 || a[0].Type != corev1.NodeInternalIP || a[0].Address != "10.213.0.2" {
		t.Errorf("NodeAddresses = %v", a)
	}
	if e := b.NodeDaemonEndpoints(ctx); e.KubeletEndpoint.Port != 10250 {
		t.Errorf("NodeDaemonEndpoints = %v", e)
	}
	if b.OperatingSystem() != "linux" || (NodeBasics{}).NodeAddresses(ctx) != nil {
		t.Error("OperatingSystem, or addresses without an IP")
	}
	since := time.Unix(1700000000, 0)
	conds := HealthyConditions(since, "the backend")
	if len(conds) != 5 || conds[0].Type != corev1.NodeReady || conds[0].Status != corev1.ConditionTrue ||
		conds[0].Message != "the backend is ready" || !conds[0].LastTransitionTime.Time.Equal(since) {
		t.Errorf("HealthyConditions = %v", conds)
	}
	for _, c := range conds[1:] {
		if c.Status != corev1.ConditionFalse {
			t.Errorf("condition %s = %s, want False", c.Type, c.Status)
		}
	}
}

// capacityProvider reports one new capacity.
type capacityProvider struct {
	Provider
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
	if _, ok := NodeProviderOf(nil, registered).(node.NaiveNodeProvider); !ok {
		t.Error("a provider that is no NodeProvider gets the naive one")
	}
	np := NodeProviderOf(capacityProvider{capacity: corev1.ResourceList{corev1.ResourcePods: resource.MustParse("7")}}, registered)
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
