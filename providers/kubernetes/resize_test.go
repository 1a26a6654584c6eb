package kubernetes

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node"
)

func cpuLimits(request, limit string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(request)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(limit)},
	}
}

// resizedRemote is B's pod at generation 2 whose container c was resized
// to 150m/300m, as B's node reports it with conds and c running with
// running's resources.
func resizedRemote(observed int64, running corev1.ResourceRequirements, conds ...corev1.PodCondition) (remote, want *corev1.Pod) {
	want = &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Resources: cpuLimits("150m", "300m")}}}}
	remote = want.DeepCopy()
	remote.Generation = 2
	remote.Status = corev1.PodStatus{ObservedGeneration: observed, Conditions: conds, ContainerStatuses: []corev1.ContainerStatus{{
		Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}, Resources: &running,
	}}}
	return remote, want
}

// TestRemoteResizeOutcome: what B's node made of a resize is A's outcome,
// with B's message; nothing until B's node acted on the generation.
func TestRemoteResizeOutcome(t *testing.T) {
	old, resized := cpuLimits("100m", "200m"), cpuLimits("150m", "300m")
	pending := func(reason, msg string) corev1.PodCondition {
		return corev1.PodCondition{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: reason, Message: msg}
	}
	for _, tc := range []struct {
		name     string
		observed int64
		running  corev1.ResourceRequirements
		conds    []corev1.PodCondition
		acted    bool
		want     node.ResizeOutcome
		wantMsg  string
	}{
		{name: "not acted on yet", observed: 1, running: old},
		{name: "applied", observed: 2, running: resized, acted: true, want: node.ResizeDone},
		{name: "in progress", observed: 2, running: old, acted: true, want: node.ResizeInProgress,
			conds: []corev1.PodCondition{{Type: corev1.PodResizeInProgress, Status: corev1.ConditionTrue}}},
		{name: "accepted, not reported yet", observed: 2, running: old, acted: true, want: node.ResizeInProgress},
		{name: "infeasible", observed: 2, running: old, acted: true, want: node.ResizeInfeasible, wantMsg: "remote cluster: Node didn't have enough capacity",
			conds: []corev1.PodCondition{pending(corev1.PodReasonInfeasible, "Node didn't have enough capacity")}},
		{name: "deferred", observed: 2, running: old, acted: true, want: node.ResizeDeferred, wantMsg: "remote cluster: later",
			conds: []corev1.PodCondition{pending(corev1.PodReasonDeferred, "later")}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			remote, want := resizedRemote(tc.observed, tc.running, tc.conds...)
			got, acted := remoteResizeOutcome(remote, want, 2)
			if acted != tc.acted || got.Outcome != tc.want || got.Message != tc.wantMsg {
				t.Errorf("remoteResizeOutcome = %+v, %v; want %s %q, %v", got, acted, tc.want, tc.wantMsg, tc.acted)
			}
		})
	}
}

// TestWithResources: B's pod takes the resized resources of every
// container and the pod's own; a container the resized pod lacks is an
// error naming it.
func TestWithResources(t *testing.T) {
	remote := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "b", Name: "p"}, Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "side", Resources: cpuLimits("10m", "20m")}},
		Containers:     []corev1.Container{{Name: "c", Resources: cpuLimits("100m", "200m")}},
	}}
	want := remote.DeepCopy()
	want.Spec.InitContainers[0].Resources = cpuLimits("20m", "40m")
	want.Spec.Containers[0].Resources = corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("150m")}}
	want.Spec.Resources = &corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}}
	got := remote.DeepCopy()
	if err := withResources(got, want); err != nil {
		t.Fatal(err)
	}
	if !sameCPUAndMemory(got.Spec.InitContainers[0].Resources, want.Spec.InitContainers[0].Resources) ||
		!sameCPUAndMemory(got.Spec.Containers[0].Resources, want.Spec.Containers[0].Resources) || // the limit is gone
		got.Spec.Resources == nil || !sameCPUAndMemory(*got.Spec.Resources, *want.Spec.Resources) {
		t.Errorf("resized remote pod: %+v", got.Spec)
	}
	want.Spec.Containers[0].Name = "other"
	if err := withResources(remote.DeepCopy(), want); err == nil || !strings.Contains(err.Error(), `container "c"`) {
		t.Errorf("resized pod without container c: %v", err)
	}
}

// TestResizeRefusedByPolicy: a resized pod the policy refuses is
// Infeasible with the policy's reason, before B is asked.
func TestResizeRefusedByPolicy(t *testing.T) {
	p := testProvider(t, Config{})
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-1"},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{Name: "c", Resources: cpuLimits("150m", "300m")}},
			Volumes:    []corev1.Volume{{Name: "host", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}},
		},
	}
	res, err := p.ResizePod(context.Background(), node.ResizeRequest{Pod: pod})
	if err != nil || res.Outcome != node.ResizeInfeasible || !strings.Contains(res.Message, "hostPath") {
		t.Errorf("ResizePod = %+v, %v; want Infeasible naming hostPath", res, err)
	}
}
