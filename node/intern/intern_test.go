package intern

import (
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
)

// decoded is a pod of a Deployment as a watch delivers it: every value its
// own allocation, whatever other pods hold.
func decoded(t *testing.T, name, ip string) *corev1.Pod {
	t.Helper()
	volume := "kube-api-access-" + name
	cpu := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "team-a-production",
			Labels:          map[string]string{"app": "web", "pod-template-hash": "5d8f7c9b6"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-5d8f7c9b6", Controller: ptr.To(true)}},
		},
		Spec: corev1.PodSpec{
			NodeName: "virtual-node-0001", SchedulerName: "default-scheduler",
			Containers: []corev1.Container{{
				Name: "web", Image: "registry.example.com/web:1.2.3", Resources: corev1.ResourceRequirements{Requests: cpu},
				Env:          []corev1.EnvVar{{Name: "LISTEN_ADDRESS", Value: "0.0.0.0:8080"}},
				VolumeMounts: []corev1.VolumeMount{{Name: volume, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
				SecurityContext: &corev1.SecurityContext{
					AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
				},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}},
				LivenessProbe:  &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/livez", Port: intstr.FromInt32(8080)}}},
			}},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true)},
			Affinity: &corev1.Affinity{PodAntiAffinity: &corev1.PodAntiAffinity{
				PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{Weight: 100, PodAffinityTerm: corev1.PodAffinityTerm{
					TopologyKey: "kubernetes.io/hostname", LabelSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				}}},
			}},
			Tolerations: []corev1.Toleration{{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr.To[int64](300)}},
			Volumes: []corev1.Volume{{Name: volume, VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{
				Sources: []corev1.VolumeProjection{{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: ptr.To[int64](3607), Path: "token"}}},
			}}}},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning, PodIP: ip, PodIPs: []corev1.PodIP{{IP: ip}},
			Conditions: []corev1.PodCondition{{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue}},
			ContainerStatuses: []corev1.ContainerStatus{{
				Name: "web", Image: "registry.example.com/web:1.2.3", AllocatedResources: cpu,
				VolumeMounts: []corev1.VolumeMountStatus{{Name: volume, MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"}},
			}},
		},
	}
	// A round trip through the wire gives each value its own memory.
	wire, err := pod.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	out := &corev1.Pod{}
	if err := out.Unmarshal(wire); err != nil {
		t.Fatal(err)
	}
	return out
}

func sameMap[M any](a, b M) bool {
	return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func sameString(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }

func TestPodSharesWhatPodsRepeatAndChangesNothing(t *testing.T) {
	a, b := decoded(t, "web-1", "10.0.0.1"), decoded(t, "web-2", "10.0.0.2")
	wantA, wantB := a.DeepCopy(), b.DeepCopy()
	in := New()
	in.Pod(a)
	in.Pod(b)
	if !equality.Semantic.DeepEqual(a, wantA) || !equality.Semantic.DeepEqual(b, wantB) {
		t.Fatal("interning changed a pod")
	}

	shared := map[string]bool{
		"labels":            sameMap(a.Labels, b.Labels),
		"namespace":         sameString(a.Namespace, b.Namespace),
		"owner":             sameString(a.OwnerReferences[0].Name, b.OwnerReferences[0].Name),
		"node name":         sameString(a.Spec.NodeName, b.Spec.NodeName),
		"image":             sameString(a.Spec.Containers[0].Image, b.Spec.Containers[0].Image),
		"env value":         sameString(a.Spec.Containers[0].Env[0].Value, b.Spec.Containers[0].Env[0].Value),
		"env list":          &a.Spec.Containers[0].Env[0] == &b.Spec.Containers[0].Env[0],
		"mount path":        sameString(a.Spec.Containers[0].VolumeMounts[0].MountPath, b.Spec.Containers[0].VolumeMounts[0].MountPath),
		"requests":          sameMap(a.Spec.Containers[0].Resources.Requests, b.Spec.Containers[0].Resources.Requests),
		"status resources":  sameMap(a.Status.ContainerStatuses[0].AllocatedResources, b.Spec.Containers[0].Resources.Requests),
		"tolerations":       &a.Spec.Tolerations[0] == &b.Spec.Tolerations[0],
		"volume source":     a.Spec.Volumes[0].Projected == b.Spec.Volumes[0].Projected,
		"pod security":      a.Spec.SecurityContext == b.Spec.SecurityContext,
		"affinity":          a.Spec.Affinity == b.Spec.Affinity,
		"security context":  a.Spec.Containers[0].SecurityContext == b.Spec.Containers[0].SecurityContext,
		"readiness probe":   a.Spec.Containers[0].ReadinessProbe == b.Spec.Containers[0].ReadinessProbe,
		"condition type":    sameString(string(a.Status.Conditions[0].Type), string(b.Status.Conditions[0].Type)),
		"status image":      sameString(a.Status.ContainerStatuses[0].Image, b.Spec.Containers[0].Image),
		"mount name in pod": sameString(a.Spec.Containers[0].VolumeMounts[0].Name, a.Spec.Volumes[0].Name),
		"status mount name": sameString(a.Status.ContainerStatuses[0].VolumeMounts[0].Name, a.Spec.Volumes[0].Name),
		"pod IP in pod":     sameString(a.Status.PodIPs[0].IP, a.Status.PodIP),
	}
	for what, ok := range shared {
		if !ok {
			t.Errorf("%s: not shared", what)
		}
	}
	if a.Spec.Containers[0].LivenessProbe == a.Spec.Containers[0].ReadinessProbe {
		t.Error("two different probes are shared")
	}
	if sameString(a.Status.PodIP, b.Status.PodIP) || sameString(a.Name, b.Name) {
		t.Error("values of one pod are shared with another")
	}
}

func TestKeysTellDifferentValuesApart(t *testing.T) {
	in := New()
	StringMap, ResourceList, Tolerations, EnvVars := in.StringMap, in.ResourceList, in.Tolerations, in.EnvVars
	if sameMap(StringMap(map[string]string{"a": "b=c"}), StringMap(map[string]string{"a=b": "c"})) {
		t.Error("two maps that differ in where a key ends are shared")
	}
	if sameMap(StringMap(map[string]string{"a": "1", "b": "2"}), StringMap(map[string]string{"a": "1"})) {
		t.Error("a map and its subset are shared")
	}
	list := func(cpu string) corev1.ResourceList {
		return corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpu)}
	}
	if !sameMap(ResourceList(list("100m")), ResourceList(list("0.1"))) {
		t.Error("100m and 0.1 are not the same list")
	}
	if sameMap(ResourceList(list("100m")), ResourceList(list("200m"))) {
		t.Error("100m and 200m are shared")
	}
	// Equal in value, written differently by String: 1Gi and 1073741824.
	gi, bytes := corev1.ResourceList{"memory": resource.MustParse("1Gi")}, corev1.ResourceList{"memory": resource.MustParse("1073741824")}
	if sameMap(ResourceList(gi), ResourceList(bytes)) {
		t.Error("a binary and a decimal quantity are shared: the pod would read back 1073741824 for 1Gi")
	}
	// 1e3 and 1k are one value in two formats of the same first letter.
	if sameMap(ResourceList(list("1e3")), ResourceList(list("1k"))) {
		t.Error("an exponent and an SI quantity are shared")
	}
	one := func(seconds int64) []corev1.Toleration {
		return []corev1.Toleration{{Key: "k", Operator: corev1.TolerationOpExists, TolerationSeconds: &seconds}}
	}
	if x, y := Tolerations(one(300)), Tolerations(one(60)); &x[0] == &y[0] {
		t.Error("tolerations of different seconds are shared")
	}
	env := func(vars ...string) []corev1.EnvVar {
		var l []corev1.EnvVar
		for i := 0; i+1 < len(vars); i += 2 {
			l = append(l, corev1.EnvVar{Name: vars[i], Value: vars[i+1]})
		}
		return l
	}
	if x, y := EnvVars(env("A", "1")), EnvVars(env("A", "2")); &x[0] == &y[0] {
		t.Error("variables of different values are shared")
	}
	if x, y := EnvVars(env("A", "1", "B", "2")), EnvVars(env("A", "1")); &x[0] == &y[0] {
		t.Error("a list and its prefix are shared")
	}
	if x, y := EnvVars(env("A", "1", "B", "2")), EnvVars(env("A", "1", "B", "2")); &x[0] != &y[0] {
		t.Error("equal lists are not shared")
	}
	if got := StringMap(nil); got != nil {
		t.Errorf("StringMap(nil) = %v", got)
	}
}

func TestTableStartsOverWhenFull(t *testing.T) {
	shared := newTable[*int](2)
	first := new(int)
	if shared.share([]byte("1"), first) != first || shared.share([]byte("1"), new(int)) != first {
		t.Fatal("a value is not shared while the table has room")
	}
	shared.share([]byte("2"), new(int))
	shared.share([]byte("3"), new(int)) // full: starts over
	if n := len(shared.values); n != 1 {
		t.Fatalf("%d values kept after starting over, want 1", n)
	}
	if shared.share([]byte("1"), new(int)) == first {
		t.Error("a value from before starting over is still kept")
	}
	long := make([]byte, maxKey+1)
	if v := new(int); shared.share(long, v) != v || len(shared.values) != 2 {
		t.Error("a value with a key over maxKey is kept")
	}
}

// TestInternersKeepTheirOwnTables shows the tables are the Interner's: a
// value one Interner kept is not handed out by another, so nothing is
// shared through the package (only strings, which package unique keeps).
func TestInternersKeepTheirOwnTables(t *testing.T) {
	one, other := New(), New()
	a, b := decoded(t, "web-1", "10.0.0.1"), decoded(t, "web-2", "10.0.0.2")
	one.Pod(a)
	other.Pod(b)
	if sameMap(a.Labels, b.Labels) || sameMap(a.Spec.Containers[0].Resources.Requests, b.Spec.Containers[0].Resources.Requests) ||
		&a.Spec.Tolerations[0] == &b.Spec.Tolerations[0] || a.Spec.Affinity == b.Spec.Affinity {
		t.Error("a value one Interner kept is handed out by another")
	}
	if !sameString(a.Spec.Containers[0].Image, b.Spec.Containers[0].Image) {
		t.Error("strings are not shared between Interners")
	}
	c := decoded(t, "web-3", "10.0.0.3")
	other.Pod(c)
	if !sameMap(b.Labels, c.Labels) {
		t.Error("an Interner does not share the labels it kept")
	}
}

// TestNilAndZeroInternersShareStringsOnly: TrimPods relies on a nil
// Interner to share strings without keeping any table.
func TestNilAndZeroInternersShareStringsOnly(t *testing.T) {
	for name, in := range map[string]*Interner{"nil": nil, "zero": {}} {
		a, b := decoded(t, "web-1", "10.0.0.1"), decoded(t, "web-2", "10.0.0.2")
		want := a.DeepCopy()
		in.Pod(a)
		in.Pod(b)
		if !equality.Semantic.DeepEqual(a, want) {
			t.Errorf("%s: interning changed a pod", name)
		}
		if !sameString(a.Namespace, b.Namespace) || !sameString(a.Spec.Containers[0].Image, b.Spec.Containers[0].Image) {
			t.Errorf("%s: strings are not shared", name)
		}
		if sameMap(a.Labels, b.Labels) || a.Spec.Affinity == b.Spec.Affinity || &a.Spec.Containers[0].Env[0] == &b.Spec.Containers[0].Env[0] {
			t.Errorf("%s: a map, list or pointer is shared without tables", name)
		}
		l := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1")}
		if !sameMap(in.ResourceList(l), l) || in.VolumeSource(corev1.VolumeSource{}) != (corev1.VolumeSource{}) ||
			in.Tolerations(nil) != nil || in.EnvVars(nil) != nil || in.StringMap(nil) != nil {
			t.Errorf("%s: a value is not returned as it was", name)
		}
		in.Requirements(&corev1.ResourceRequirements{Requests: l})
		in.Requirements(nil)
	}
}
