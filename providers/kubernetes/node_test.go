package kubernetes

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

// TestRemoteCapacity: B's schedulable allocatable minus what runs there,
// this node's own pods excepted (A already counts them against it).
func TestRemoteCapacity(t *testing.T) {
	rl := func(cpu, mem, pods string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem), corev1.ResourcePods: resource.MustParse(pods)}
	}
	node := func(name string, unschedulable bool, alloc corev1.ResourceList) *corev1.Node {
		return &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.NodeSpec{Unschedulable: unschedulable}, Status: corev1.NodeStatus{Allocatable: alloc}}
	}
	pod := func(name, nodeName string, phase corev1.PodPhase, labels map[string]string, cpu, mem string) *corev1.Pod {
		req := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu), corev1.ResourceMemory: resource.MustParse(mem)}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: labels},
			Spec:       corev1.PodSpec{NodeName: nodeName, Containers: []corev1.Container{{Name: "c", Resources: corev1.ResourceRequirements{Requests: req}}}},
			Status:     corev1.PodStatus{Phase: phase},
		}
	}
	initPod := pod("init", "w1", corev1.PodRunning, nil, "100m", "100Mi")
	initPod.Spec.InitContainers = []corev1.Container{{Name: "i", Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}}}
	client := fake.NewClientset(
		node("w1", false, rl("8", "16Gi", "110")),
		node("w2", false, rl("4", "8Gi", "110")),
		node("cordoned", true, rl("64", "256Gi", "110")),
		pod("other", "w1", corev1.PodRunning, nil, "2", "1Gi"),
		initPod, // an init container's larger request counts
		pod("ours", "w1", corev1.PodRunning, map[string]string{LabelNode: "vk-b"}, "3", "3Gi"),
		pod("other-vk", "w2", corev1.PodRunning, map[string]string{LabelNode: "vk-c"}, "500m", "512Mi"),
		pod("done", "w2", corev1.PodSucceeded, nil, "4", "4Gi"),
		pod("pending", "", corev1.PodPending, nil, "4", "4Gi"),
	)
	p := &Provider{remote: client, nodeName: "vk-b"}
	got, err := p.remoteCapacity(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	// 12 CPU - 2 - 1 - 0.5; 24Gi - 1Gi - 100Mi - 512Mi; 220 pods - 3.
	want := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8500m"),
		corev1.ResourceMemory: resource.MustParse(resourceString(24<<30 - 1<<30 - 100<<20 - 512<<20)),
		corev1.ResourcePods:   resource.MustParse("217"),
	}
	for name, q := range want {
		if g := got[name]; g.Cmp(q) != 0 {
			t.Errorf("%s = %s, want %s", name, g.String(), q.String())
		}
	}
	if len(got) != len(want) {
		t.Errorf("capacity %v, want only %v", got, want)
	}

	// More running in B than it has: zero, not negative.
	full := freeCapacity("vk-b", []corev1.Node{*node("w", false, rl("1", "1Gi", "1"))}, []corev1.Pod{*pod("big", "w", corev1.PodRunning, nil, "2", "2Gi")})
	if cpu := full[corev1.ResourceCPU]; cpu.Sign() != 0 {
		t.Errorf("overcommitted cpu = %s, want 0", cpu.String())
	}
}

func resourceString(bytes int64) string {
	return resource.NewQuantity(bytes, resource.BinarySI).String()
}
