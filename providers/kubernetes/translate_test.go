package kubernetes

import (
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/provider"
)

func TestRemoteNames(t *testing.T) {
	one := namer{namespace: "from-a"}
	ns1, n1 := one.remote("a-b", "c")
	ns2, n2 := one.remote("a", "b-c")
	if ns1 != "from-a" || ns2 != "from-a" || n1 == n2 || !strings.HasPrefix(n1, "a-b-c-") {
		t.Errorf("one namespace: %s/%s and %s/%s", ns1, n1, ns2, n2)
	}
	if _, again := one.remote("a-b", "c"); again != n1 {
		t.Errorf("names are not deterministic: %s then %s", n1, again)
	}
	if _, long := one.remote("ns", strings.Repeat("x", 253)); len(long) > 253 {
		t.Errorf("name of %d characters", len(long))
	}
	perNamespace := namer{prefix: "a-"}
	if ns, n := perNamespace.remote("team", "web"); ns != "a-team" || n != "web" {
		t.Errorf("per namespace: %s/%s", ns, n)
	}
}

func TestRemotePod(t *testing.T) {
	p := &Provider{
		cfg: &Config{Pods: RemotePodScheduling{
			NodeSelector: map[string]string{"pool": "burst"},
			Tolerations:  []corev1.Toleration{{Key: "burst", Operator: corev1.TolerationOpExists}},
		}},
		names:      namer{prefix: "a-"},
		nodeName:   "vk-b",
		NodeBasics: provider.NodeBasics{InternalIP: "10.0.0.9"},
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"note": "kept"}},
		Spec: corev1.PodSpec{
			NodeName:           "vk-b",
			NodeSelector:       map[string]string{"type": "virtual-kubelet"},
			ServiceAccountName: "default",
			Tolerations:        []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}},
			Containers: []corev1.Container{{Name: "app", Image: "nginx", Env: []corev1.EnvVar{
				{Name: "COLOR", ValueFrom: &corev1.EnvVarSource{ConfigMapKeyRef: &corev1.ConfigMapKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "color"}}},
				{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
					LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "password"}}},
				{Name: "PLAIN", Value: "$(COLOR)"},
			}, EnvFrom: []corev1.EnvFromSource{
				{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: "extra"}, Optional: ptr.To(true)}},
			}, VolumeMounts: []corev1.VolumeMount{
				{Name: "kube-api-access-x", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount"},
				{Name: "settings", MountPath: "/etc/settings"},
			}}},
			Volumes: []corev1.Volume{
				{Name: "kube-api-access-x", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{Path: "token"}},
				}}}},
				{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
					LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds", Optional: ptr.To(true)}}},
			},
		},
	}
	r := p.remotePod(pod)
	if r.Namespace != "a-team" || r.Name != "web" || r.Labels[LabelNode] != "vk-b" || r.Labels[LabelSourceUID] != "uid-1" ||
		r.Labels[LabelSourceNamespace] != "team" || r.Annotations[AnnotationSourceName] != "web" || r.Annotations["note"] != "kept" || r.Labels["app"] != "" {
		t.Errorf("remote meta: %+v", r.ObjectMeta)
	}
	if r.Spec.NodeName != "" || r.Spec.NodeSelector["pool"] != "burst" || len(r.Spec.Tolerations) != 1 || r.Spec.Tolerations[0].Key != "burst" {
		t.Errorf("remote scheduling: nodeName %q nodeSelector %v tolerations %v", r.Spec.NodeName, r.Spec.NodeSelector, r.Spec.Tolerations)
	}
	if r.Spec.ServiceAccountName != "" || !ptr.Equal(r.Spec.AutomountServiceAccountToken, ptr.To(false)) ||
		len(r.Spec.Volumes) != 2 || len(r.Spec.Containers[0].VolumeMounts) != 1 {
		t.Errorf("service account token not dropped: %+v", r.Spec)
	}
	if pod.Spec.NodeName != "vk-b" || len(pod.Spec.Volumes) != 3 {
		t.Error("remotePod modified the source pod")
	}
	if env, from := r.Spec.Containers[0].Env, r.Spec.Containers[0].EnvFrom; env[0].ValueFrom.ConfigMapKeyRef.Name != "settings" ||
		env[1].ValueFrom.SecretKeyRef.Name != "creds" || env[2].Value != "$(COLOR)" || from[0].ConfigMapRef.Name != "extra" ||
		ptr.Deref(r.Spec.EnableServiceLinks, true) {
		t.Errorf("env of the remote pod: %+v %+v, service links %v", env, from, r.Spec.EnableServiceLinks)
	}
	if pod.Spec.Containers[0].EnvFrom[0].ConfigMapRef.Name != "extra" {
		t.Error("remotePod renamed the source pod's references")
	}
	// The volume makes "creds" optional, the env mandatory: mandatory wins.
	cms, secrets := referencedObjects(pod)
	if want := []objectRef{{"settings", false}, {"extra", true}}; !reflect.DeepEqual(cms, want) {
		t.Errorf("referenced configmaps: %v, want %v", cms, want)
	}
	if want := []objectRef{{"creds", false}}; !reflect.DeepEqual(secrets, want) {
		t.Errorf("referenced secrets: %v, want %v", secrets, want)
	}

	// With one namespace in B, env references point at the copies' names.
	one := &Provider{cfg: p.cfg, names: namer{namespace: "from-a"}, nodeName: "vk-b"}
	r1 := one.remotePod(pod)
	_, settingsCopy := one.names.remote("team", "settings")
	_, credsCopy := one.names.remote("team", "creds")
	_, extraCopy := one.names.remote("team", "extra")
	if env, from := r1.Spec.Containers[0].Env, r1.Spec.Containers[0].EnvFrom; env[0].ValueFrom.ConfigMapKeyRef.Name != settingsCopy ||
		env[1].ValueFrom.SecretKeyRef.Name != credsCopy || from[0].ConfigMapRef.Name != extraCopy || r1.Spec.Volumes[0].ConfigMap.Name != settingsCopy {
		t.Errorf("references in one namespace: env %+v envFrom %+v volumes %+v", env, from, r1.Spec.Volumes)
	}

	r.Status = corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.5", HostIP: "10.213.1.2"}
	back := p.localPod(r)
	if back.Namespace != "team" || back.Name != "web" || back.UID != "uid-1" || back.Spec.NodeName != "vk-b" ||
		back.Status.PodIP != "10.244.0.5" || back.Status.HostIP != "10.0.0.9" {
		t.Errorf("local pod: %+v %+v", back.ObjectMeta, back.Status)
	}
}

// TestAlreadyStopping: a DELETE is sent again only when it would shorten
// the stop B is already making.
func TestAlreadyStopping(t *testing.T) {
	now := metav1.Now()
	running := &corev1.Pod{Spec: corev1.PodSpec{TerminationGracePeriodSeconds: ptr.To[int64](30)}}
	stopping := running.DeepCopy()
	stopping.DeletionTimestamp, stopping.DeletionGracePeriodSeconds = &now, ptr.To[int64](30)
	for _, c := range []struct {
		name  string
		pod   *corev1.Pod
		grace *int64
		want  bool
	}{
		{"running", running, ptr.To[int64](30), false},
		{"stopping, same grace", stopping, ptr.To[int64](30), true},
		{"stopping, the pod's own grace", stopping, nil, true},
		{"stopping, shorter grace", stopping, ptr.To[int64](5), false},
		{"stopping, forced", stopping, ptr.To[int64](0), false},
	} {
		if got := alreadyStopping(c.pod, c.grace); got != c.want {
			t.Errorf("%s: alreadyStopping = %v, want %v", c.name, got, c.want)
		}
	}
}
