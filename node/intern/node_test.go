package intern

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// decodedNode is a managed Node as a watch delivers it, its status written
// by the daemon: every value its own allocation.
func decodedNode(t *testing.T, name, ip string) *corev1.Node {
	t.Helper()
	capacity := corev1.ResourceList{
		corev1.ResourceCPU: resource.MustParse("20"), corev1.ResourceMemory: resource.MustParse("100Gi"),
		corev1.ResourcePods: resource.MustParse("10k"),
	}
	node := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name:        name,
			Labels:      map[string]string{"type": "kwok", corev1.LabelHostname: name},
			Annotations: map[string]string{"kwok.x-k8s.io/node": "fake", "node.alpha.kubernetes.io/ttl": "60"},
		},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{Key: "kwok.x-k8s.io/node", Value: "fake", Effect: corev1.TaintEffectNoSchedule}}},
		Status: corev1.NodeStatus{
			Capacity: capacity, Allocatable: capacity.DeepCopy(),
			// A kubelet's five: decoded, they sit in an array of nine.
			Conditions: []corev1.NodeCondition{
				{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "kubelet is posting ready status"},
				{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse},
				{Type: corev1.NodePIDPressure, Status: corev1.ConditionFalse}, {Type: corev1.NodeNetworkUnavailable, Status: corev1.ConditionFalse},
			},
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: ip}},
			NodeInfo: corev1.NodeSystemInfo{
				MachineID: name, KubeletVersion: "v1.36.3", OperatingSystem: "linux", Architecture: "amd64",
			},
			DeclaredFeatures: []string{"ExtendWebSocketsToKubelet"},
			RuntimeHandlers:  []corev1.NodeRuntimeHandler{{Name: "runc"}},
		},
	}
	wire, err := node.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := &corev1.Node{}
	if err := out.Unmarshal(wire); err != nil {
		t.Fatal(err)
	}
	return out
}

func TestNodeSharesWhatNodesRepeatAndChangesNothing(t *testing.T) {
	a, b := decodedNode(t, "kwok-1", "10.0.0.1"), decodedNode(t, "kwok-2", "10.0.0.2")
	wantA, wantB := a.DeepCopy(), b.DeepCopy()
	in := New()
	in.Node(a)
	in.Node(b)
	if !equality.Semantic.DeepEqual(a, wantA) || !equality.Semantic.DeepEqual(b, wantB) {
		t.Fatal("interning changed a node")
	}
	shared := map[string]bool{
		"annotation key":    sameString(keyOf(a.Annotations, "kwok.x-k8s.io/node"), keyOf(b.Annotations, "kwok.x-k8s.io/node")),
		"label key":         sameString(keyOf(a.Labels, "type"), keyOf(b.Labels, "type")),
		"taint":             sameString(a.Spec.Taints[0].Key, b.Spec.Taints[0].Key),
		"capacity":          sameMap(a.Status.Capacity, b.Status.Capacity),
		"allocatable":       sameMap(a.Status.Allocatable, b.Status.Capacity),
		"condition message": sameString(a.Status.Conditions[0].Message, b.Status.Conditions[0].Message),
		"address type":      sameString(string(a.Status.Addresses[0].Type), string(b.Status.Addresses[0].Type)),
		"kubelet version":   sameString(a.Status.NodeInfo.KubeletVersion, b.Status.NodeInfo.KubeletVersion),
		"declared feature":  sameString(a.Status.DeclaredFeatures[0], b.Status.DeclaredFeatures[0]),
		"runtime handler":   sameString(a.Status.RuntimeHandlers[0].Name, b.Status.RuntimeHandlers[0].Name),
	}
	for what, ok := range shared {
		if !ok {
			t.Errorf("%s: not shared", what)
		}
	}
	if n := len(a.Status.Conditions); cap(a.Status.Conditions) != n {
		t.Errorf("%d conditions are kept in an array of %d", n, cap(a.Status.Conditions))
	}
	if sameMap(a.Labels, b.Labels) || sameString(a.Status.Addresses[0].Address, b.Status.Addresses[0].Address) {
		t.Error("values of one node are shared with another")
	}

	// Without tables, strings only.
	c, d := decodedNode(t, "kwok-3", "10.0.0.3"), decodedNode(t, "kwok-4", "10.0.0.4")
	var none *Interner
	none.Node(c)
	none.Node(d)
	if sameMap(c.Status.Capacity, d.Status.Capacity) || !sameString(c.Status.Conditions[0].Reason, d.Status.Conditions[0].Reason) {
		t.Error("a nil Interner shares maps, or no strings")
	}
}

// keyOf is m's own instance of key k.
func keyOf(m map[string]string, k string) string {
	for key := range m {
		if key == k {
			return key
		}
	}
	return ""
}
