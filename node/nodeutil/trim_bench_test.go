package nodeutil

import (
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/intern"
)

// benchPod is a running pod of hack/bench as the API server stores it:
// admission's token volume and toleration, the status the daemon writes.
func benchPod(i int) *corev1.Pod {
	name := fmt.Sprintf("p-%05d", i)
	volume := fmt.Sprintf("kube-api-access-%05x", i)
	at := metav1.NewTime(time.Date(2026, 11, 27, 1, 14, 53, 0, time.UTC))
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1m")}
	condition := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: at, ObservedGeneration: 1}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "bench-vk-10000", UID: types.UID(fmt.Sprintf("651ede20-8f5c-412f-bb36-%012d", i)),
			ResourceVersion: fmt.Sprint(60555 + i), Generation: 1, CreationTimestamp: at,
			Labels: map[string]string{"app": "bench"},
		},
		Spec: corev1.PodSpec{
			Containers: []corev1.Container{{
				Name: "main", Image: "busybox", ImagePullPolicy: corev1.PullAlways,
				Resources:              corev1.ResourceRequirements{Requests: cpu},
				TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile,
				VolumeMounts: []corev1.VolumeMount{{Name: volume, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true}},
			}},
			DNSPolicy: corev1.DNSClusterFirst, EnableServiceLinks: ptr.To(true), NodeName: "bench-vk-10000",
			PreemptionPolicy: ptr.To(corev1.PreemptLowerPriority), Priority: ptr.To[int32](0), RestartPolicy: corev1.RestartPolicyAlways,
			SchedulerName: "default-scheduler", SecurityContext: &corev1.PodSecurityContext{},
			ServiceAccountName: "default", DeprecatedServiceAccount: "default", TerminationGracePeriodSeconds: ptr.To[int64](30),
			Tolerations: []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			Volumes: []corev1.Volume{{Name: volume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				DefaultMode: ptr.To[int32](420),
				Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				},
			}}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, QOSClass: corev1.PodQOSBurstable, ObservedGeneration: 1,
			Conditions: []corev1.PodCondition{
				condition("PodReadyToStartContainers"), condition(corev1.PodInitialized),
				condition(corev1.ContainersReady), condition(corev1.PodReady),
			},
			HostIP: "127.0.0.1", HostIPs: []corev1.HostIP{{IP: "127.0.0.1"}},
			PodIP: fmt.Sprintf("10.244.%d.%d", i/256, i%256), PodIPs: []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", i/256, i%256)}},
			StartTime: &at, AllocatedResources: cpu, Resources: &corev1.ResourceRequirements{Requests: cpu},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "main", Image: "busybox", ImageID: "mock://busybox", ContainerID: "mock://" + name + "/main",
				Ready: true, Started: ptr.To(true), AllocatedResources: cpu, Resources: &corev1.ResourceRequirements{Requests: cpu},
				State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: at}},
			}},
		},
	}
}

// BenchmarkCachedPod is what a pod informer's cache holds per running pod
// of the bench: each pod decoded from protobuf as the watch decodes it,
// then passed through the daemon's transform, TrimPodsWith one Interner.
// B/pod is the heap the cache keeps.
func BenchmarkCachedPod(b *testing.B) {
	const n = 5000
	wire := make([][]byte, n)
	for i := range wire {
		var err error
		if wire[i], err = benchPod(i).Marshal(); err != nil {
			b.Fatal(err)
		}
	}
	transform := TrimPodsWith(intern.New())
	var perPod float64
	for b.Loop() {
		cache := make([]any, n)
		runtime.GC()
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		for i := range cache {
			pod := &corev1.Pod{}
			if err := pod.Unmarshal(wire[i]); err != nil {
				b.Fatal(err)
			}
			obj, err := transform(pod)
			if err != nil {
				b.Fatal(err)
			}
			cache[i] = obj
		}
		runtime.GC()
		runtime.ReadMemStats(&after)
		perPod = float64(after.HeapAlloc-before.HeapAlloc) / n
		runtime.KeepAlive(cache)
	}
	b.ReportMetric(perPod, "B/pod")
}

// BenchmarkTrimPods is the transform's cost per pod event, without the
// decoding before it.
func BenchmarkTrimPods(b *testing.B) {
	transform := TrimPodsWith(intern.New())
	wire, err := benchPod(1).Marshal()
	if err != nil {
		b.Fatal(err)
	}
	pods := make([]*corev1.Pod, 1000)
	for b.Loop() {
		b.StopTimer()
		for i := range pods {
			pods[i] = &corev1.Pod{}
			if err := pods[i].Unmarshal(wire); err != nil {
				b.Fatal(err)
			}
		}
		b.StartTimer()
		for _, pod := range pods {
			if _, err := transform(pod); err != nil {
				b.Fatal(err)
			}
		}
	}
}
