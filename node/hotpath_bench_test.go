package node

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// benchPod is a pod of typical size: two containers with env, resources,
// probes and ports, labels and annotations.
func benchPod() *corev1.Pod {
	container := func(name string) corev1.Container {
		return corev1.Container{
			Name: name, Image: "registry.example.com/team/" + name + ":v1.2.3",
			Command: []string{"/bin/server"}, Args: []string{"--port=8080", "--verbose"},
			Env: []corev1.EnvVar{{Name: "A", Value: "1"}, {Name: "B", Value: "2"}, {Name: "POD", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
			Ports: []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("256Mi")},
			},
			ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}},
		}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web-7d9f8c-abcde", UID: "7d9f8c",
			Labels:      map[string]string{"app": "web", "pod-template-hash": "7d9f8c"},
			Annotations: map[string]string{"team": "a", "mock.vkubelet.io/run-for": "10s"}},
		Spec: corev1.PodSpec{
			NodeName: "vk0", Containers: []corev1.Container{container("app"), container("sidecar")},
			Tolerations: []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}},
		},
	}
}

func benchStatus(phase corev1.PodPhase) corev1.PodStatus {
	now := metav1.NewTime(time.Unix(1_800_000_000, 123456789))
	s := corev1.PodStatus{Phase: phase, HostIP: "10.213.0.2", PodIP: "10.244.0.9", StartTime: &now, QOSClass: corev1.PodQOSBurstable,
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now}}}
	for _, n := range []string{"app", "sidecar"} {
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{Name: n, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}}})
	}
	return s
}

// BenchmarkNeedsSync is the informer's update filter, run for every pod
// update event (most of them our own status writes): with generations (the
// API server sets them since 1.35) and without (a spec comparison).
func BenchmarkNeedsSync(b *testing.B) {
	for _, gen := range []int64{1, 0} {
		name := "generation"
		if gen == 0 {
			name = "specCompare"
		}
		b.Run(name, func(b *testing.B) {
			old := benchPod()
			old.Generation = gen
			cur := old.DeepCopy()
			cur.ResourceVersion = "2"
			cur.Status = benchStatus(corev1.PodRunning)
			b.ReportAllocs()
			for b.Loop() {
				if needsSync(old, cur) {
					b.Fatal("a status-only update needs no sync")
				}
			}
		})
	}
}

// BenchmarkStatusEqual is the check that skips writes and notifications
// when nothing changed.
func BenchmarkStatusEqual(b *testing.B) {
	a, c := benchStatus(corev1.PodRunning), benchStatus(corev1.PodRunning)
	b.ReportAllocs()
	for b.Loop() {
		if !statusEqual(&a, &c) {
			b.Fatal("equal statuses")
		}
	}
}

// BenchmarkMergeStatus merges a provider's status into the current one.
func BenchmarkMergeStatus(b *testing.B) {
	cur, prov := benchStatus(corev1.PodPending), benchStatus(corev1.PodRunning)
	prov.Conditions = prov.Conditions[:1]
	b.ReportAllocs()
	for b.Loop() {
		_ = mergeStatus(cur, prov)
	}
}
