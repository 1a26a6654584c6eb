package nodeutil

import (
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node/intern"
)

func list(kv ...string) corev1.ResourceList {
	l := corev1.ResourceList{}
	for i := 0; i+1 < len(kv); i += 2 {
		l[corev1.ResourceName(kv[i])] = resource.MustParse(kv[i+1])
	}
	return l
}

// sizedPod is a pod as the API server sends it, its status reporting the
// resources of its spec.
func sizedPod(name, cpu, memory string) *corev1.Pod {
	r := corev1.ResourceRequirements{Requests: list("cpu", cpu, "memory", memory), Limits: list("memory", memory)}
	status := r.DeepCopy()
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: r}}},
		Status: corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{{
			Name: "c", AllocatedResources: list("cpu", cpu, "memory", memory), Resources: status,
		}}},
	}
}

func same(a, b corev1.ResourceList) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func trim(t *testing.T, transform cache.TransformFunc, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := transform(pod)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Pod)
}

func TestTrimPodsWithSharesEqualResourceLists(t *testing.T) {
	transform := TrimPodsWith(intern.New())
	a := trim(t, transform, sizedPod("a", "100m", "64Mi"))
	// 0.1 is 100m: written otherwise, the same list.
	b := trim(t, transform, sizedPod("b", "0.1", "64Mi"))
	other := trim(t, transform, sizedPod("other", "200m", "64Mi"))

	if a.ManagedFields != nil {
		t.Error("managedFields are kept")
	}
	ac, bc := a.Spec.Containers[0].Resources, b.Spec.Containers[0].Resources
	if !same(ac.Requests, bc.Requests) || !same(ac.Limits, bc.Limits) {
		t.Error("equal spec lists of two pods are not shared")
	}
	as, bs := a.Status.ContainerStatuses[0], b.Status.ContainerStatuses[0]
	if !same(as.AllocatedResources, bs.AllocatedResources) || !same(as.Resources.Requests, bs.Resources.Requests) {
		t.Error("equal status lists of two pods are not shared")
	}
	if !same(ac.Requests, as.AllocatedResources) {
		t.Error("a pod's spec and status lists are not shared")
	}
	if same(other.Spec.Containers[0].Resources.Requests, ac.Requests) {
		t.Error("different lists are shared")
	}
	if !same(other.Spec.Containers[0].Resources.Limits, ac.Limits) {
		t.Error("the limits the third pod has in common are not shared")
	}
	if q := b.Spec.Containers[0].Resources.Requests[corev1.ResourceCPU]; q.MilliValue() != 100 {
		t.Errorf("b's cpu request is %s, want 100m", q.String())
	}
}

// TestTrimPodsKeepsNoTables: the transform without an Interner shares a
// pod's strings, and nothing that would need a table, so no pod's lists
// are kept by the package; two transforms with Interners of their own
// share nothing but strings either.
func TestTrimPodsKeepsNoTables(t *testing.T) {
	a := trim(t, TrimPods, sizedPod("a", "100m", "64Mi"))
	b := trim(t, TrimPods, sizedPod("b", "100m", "64Mi"))
	if a.ManagedFields != nil {
		t.Error("managedFields are kept")
	}
	if same(a.Spec.Containers[0].Resources.Requests, b.Spec.Containers[0].Resources.Requests) {
		t.Error("TrimPods shared a resource list: it keeps a table")
	}
	if unsafe.StringData(a.Spec.Containers[0].Name) != unsafe.StringData(b.Spec.Containers[0].Name) {
		t.Error("TrimPods did not share the container name")
	}
	c := trim(t, TrimPodsWith(intern.New()), sizedPod("c", "100m", "64Mi"))
	d := trim(t, TrimPodsWith(intern.New()), sizedPod("d", "100m", "64Mi"))
	if same(c.Spec.Containers[0].Resources.Requests, d.Spec.Containers[0].Resources.Requests) {
		t.Error("two Interners shared a resource list")
	}
}

func TestTrimPodsLeavesOtherObjectsToDropManagedFields(t *testing.T) {
	for name, transform := range map[string]cache.TransformFunc{"TrimPods": TrimPods, "TrimPodsWith": TrimPodsWith(intern.New())} {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
		out, err := transform(cm)
		if err != nil || out.(*corev1.ConfigMap).ManagedFields != nil {
			t.Errorf("%s(configmap) = %v, %v", name, out, err)
		}
	}
}
