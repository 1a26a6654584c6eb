package nodeutil

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

func trim(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	out, err := TrimPods(pod)
	if err != nil {
		t.Fatal(err)
	}
	return out.(*corev1.Pod)
}

func TestTrimPodsSharesEqualResourceLists(t *testing.T) {
	a := trim(t, sizedPod("a", "100m", "64Mi"))
	// 0.1 is 100m: written otherwise, the same list.
	b := trim(t, sizedPod("b", "0.1", "64Mi"))
	other := trim(t, sizedPod("other", "200m", "64Mi"))

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

func TestTrimPodsLeavesOtherObjectsToDropManagedFields(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}}}
	out, err := TrimPods(cm)
	if err != nil || out.(*corev1.ConfigMap).ManagedFields != nil {
		t.Errorf("TrimPods(configmap) = %v, %v", out, err)
	}
}
