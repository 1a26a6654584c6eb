package node

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// TestWithObservedGeneration: the generation acted on goes into
// status.observedGeneration and the conditions the kubelet owns, including
// PodScheduled; a resize condition keeps its own generation, another
// owner's condition is left alone, a lower generation does not take the
// status's back, and the status handed in is not changed.
func TestWithObservedGeneration(t *testing.T) {
	in := corev1.PodStatus{Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, ObservedGeneration: 1},
		{Type: corev1.PodInitialized, Status: corev1.ConditionTrue},
		{Type: corev1.ContainersReady, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue},
		{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue, ObservedGeneration: 2},
		{Type: corev1.DisruptionTarget, Status: corev1.ConditionTrue, ObservedGeneration: 1},
		{Type: "example.com/gate", Status: corev1.ConditionTrue},
	}}
	out := withObservedGeneration(in, &corev1.PodStatus{ObservedGeneration: 1}, 3)
	if out.ObservedGeneration != 3 {
		t.Errorf("observedGeneration = %d, want 3", out.ObservedGeneration)
	}
	want := map[corev1.PodConditionType]int64{
		corev1.PodScheduled: 3, corev1.PodReadyToStartContainers: 3, corev1.PodInitialized: 3,
		corev1.ContainersReady: 3, corev1.PodReady: 3,
		corev1.PodResizeInProgress: 2, corev1.DisruptionTarget: 1, "example.com/gate": 0,
	}
	for _, c := range out.Conditions {
		if c.ObservedGeneration != want[c.Type] {
			t.Errorf("%s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, want[c.Type])
		}
	}
	if in.Conditions[0].ObservedGeneration != 0 || in.Conditions[1].ObservedGeneration != 1 {
		t.Error("the status handed in was changed")
	}

	if got := withObservedGeneration(in, &corev1.PodStatus{ObservedGeneration: 5}, 3).ObservedGeneration; got != 5 {
		t.Errorf("observedGeneration = %d after 5 was written, want it kept", got)
	}
	if got := withObservedGeneration(in, &corev1.PodStatus{}, 0); got.ObservedGeneration != 0 || got.Conditions[0].ObservedGeneration != 0 {
		t.Errorf("nothing acted on, yet the status shows generation %d", got.ObservedGeneration)
	}
}

// writtenStatus is the status of ns/p in client, after the controller's
// patches.
func writtenStatus(t *testing.T, client *fake.Clientset) corev1.PodStatus {
	t.Helper()
	pod, err := client.CoreV1().Pods("ns").Get(context.Background(), "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return pod.Status
}

// TestStatusShowsGenerationActedOn: after a spec update (an image change
// bumps metadata.generation to 2) is handed to the provider, the status the
// controller writes shows generation 2 in status.observedGeneration and in
// each of the kubelet's conditions, although the provider reported nothing
// new; before, it shows 1.
func TestStatusShowsGenerationActedOn(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", Generation: 1, ResourceVersion: "1"},
		Spec:       corev1.PodSpec{NodeName: "vk", Containers: []corev1.Container{{Name: "c", Image: "busybox:1"}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending, Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		}},
	}
	client := fake.NewClientset(pod)
	pc := controllerWithCached(t, client, pod)
	// The test plays the informer: its cache is one the test updates.
	informed := cache.NewIndexer(cache.MetaNamespaceKeyFunc, cache.Indexers{cache.NamespaceIndex: cache.MetaNamespaceIndexFunc})
	if err := informed.Add(pod); err != nil {
		t.Fatal(err)
	}
	pc.lister = corev1listers.NewPodLister(informed)
	ctx := context.Background()
	if err := pc.syncPodFromKubernetes(ctx, "ns/p"); err != nil {
		t.Fatal(err)
	}
	running := pod.DeepCopy()
	running.Status = corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "c", Image: "busybox:1", Ready: true, State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}},
	}}}
	pc.pods.get("ns/p").providerReported(running)
	if err := pc.syncPodStatusFromProvider(ctx, "ns/p"); err != nil {
		t.Fatal(err)
	}
	checkGeneration(t, writtenStatus(t, client), 1)

	// The informer brings the written status, then the image change.
	updated, err := client.CoreV1().Pods("ns").Get(ctx, "p", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	updated.Spec.Containers[0].Image = "busybox:2"
	updated.Generation = 2
	if updated, err = client.CoreV1().Pods("ns").Update(ctx, updated, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := informed.Update(updated); err != nil {
		t.Fatal(err)
	}
	if err := pc.syncPodFromKubernetes(ctx, "ns/p"); err != nil {
		t.Fatal(err)
	}
	if err := pc.syncPodStatusFromProvider(ctx, "ns/p"); err != nil {
		t.Fatal(err)
	}
	checkGeneration(t, writtenStatus(t, client), 2)
}

// checkGeneration fails t unless s shows gen acted on, in the status and
// in each of the kubelet's conditions, PodScheduled among them.
func checkGeneration(t *testing.T, s corev1.PodStatus, gen int64) {
	t.Helper()
	if s.ObservedGeneration != gen {
		t.Errorf("observedGeneration = %d, want %d", s.ObservedGeneration, gen)
	}
	seen := map[corev1.PodConditionType]bool{}
	for _, c := range s.Conditions {
		seen[c.Type] = true
		if c.ObservedGeneration != gen {
			t.Errorf("%s observedGeneration = %d, want %d", c.Type, c.ObservedGeneration, gen)
		}
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodScheduled, corev1.PodReady, corev1.ContainersReady, corev1.PodInitialized, corev1.PodReadyToStartContainers} {
		if !seen[typ] {
			t.Errorf("no %s condition written in %+v", typ, s.Conditions)
		}
	}
}

// TestConfigErrorShowsGeneration: a pod whose environment cannot be
// resolved is never handed to the provider, yet the status the controller
// writes for it was decided on its generation, and shows it, as the
// kubelet's does.
func TestConfigErrorShowsGeneration(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "u1", Generation: 4, ResourceVersion: "1"},
		Spec: corev1.PodSpec{NodeName: "vk", Containers: []corev1.Container{{Name: "c", Image: "busybox", EnvFrom: []corev1.EnvFromSource{
			{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "absent"}}},
		}}}},
		Status: corev1.PodStatus{Phase: corev1.PodPending},
	}
	client := fake.NewClientset(pod)
	pc := controllerWithCached(t, client, pod)
	ctx := context.Background()
	_ = pc.syncPodFromKubernetes(ctx, "ns/p") // an error, or none for a reference never to resolve
	if err := pc.syncPodStatusFromProvider(ctx, "ns/p"); err != nil {
		t.Fatal(err)
	}
	s := writtenStatus(t, client)
	if len(s.ContainerStatuses) != 1 || s.ContainerStatuses[0].State.Waiting == nil || s.ContainerStatuses[0].State.Waiting.Reason != ReasonCreateContainerConfigError {
		t.Fatalf("container statuses %+v, want c waiting with %s", s.ContainerStatuses, ReasonCreateContainerConfigError)
	}
	if s.ObservedGeneration != 4 {
		t.Errorf("observedGeneration = %d, want 4", s.ObservedGeneration)
	}
	for _, c := range s.Conditions {
		if c.ObservedGeneration != 4 {
			t.Errorf("%s observedGeneration = %d, want 4", c.Type, c.ObservedGeneration)
		}
	}
}
