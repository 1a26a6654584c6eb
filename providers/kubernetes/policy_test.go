package kubernetes

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// restrictedPod meets the restricted level and uses a ConfigMap, a Secret
// and a projected volume.
func restrictedPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "web", UID: "uid-1"},
		Spec: corev1.PodSpec{
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr.To(true), SeccompProfile: &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault}},
			Containers: []corev1.Container{{Name: "app", Image: "nginx", SecurityContext: &corev1.SecurityContext{
				AllowPrivilegeEscalation: ptr.To(false), Capabilities: &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
			}}},
			Volumes: []corev1.Volume{
				{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
				{Name: "sec", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
				{Name: "proj", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{Sources: []corev1.VolumeProjection{
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "name", FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}}},
				}}}},
				{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
			},
		},
	}
}

// TestPolicyDecisions: what crosses to B at each level, and the message of
// each refusal, which names the field.
func TestPolicyDecisions(t *testing.T) {
	privileged := func(p *corev1.Pod) { p.Spec.Containers[0].SecurityContext.Privileged = ptr.To(true) }
	hostPath := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "root", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}})
	}
	pvc := func(p *corev1.Pod) {
		p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "data", VolumeSource: corev1.VolumeSource{
			PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{ClaimName: "b-db"}}})
	}
	runAsRoot := func(p *corev1.Pod) { p.Spec.SecurityContext.RunAsNonRoot = nil }
	for _, tt := range []struct {
		name   string
		cfg    Config
		change func(*corev1.Pod)
		want   string // "" when the pod crosses
	}{
		{"restricted pod, restricted level", Config{PodSecurity: "restricted"}, nil, ""},
		{"root pod, baseline level", Config{}, runAsRoot, ""},
		{"root pod, restricted level", Config{PodSecurity: "restricted"}, runAsRoot, `violates PodSecurity "restricted:latest" of the remote cluster's provider: runAsNonRoot != true (pod or container "app" must set securityContext.runAsNonRoot=true)`},
		{"privileged", Config{}, privileged, `privileged (container "app" must not set securityContext.privileged=true)`},
		{"privileged, privileged level", Config{PodSecurity: "privileged"}, privileged, ""},
		{"hostNetwork and hostPID", Config{}, func(p *corev1.Pod) { p.Spec.HostNetwork, p.Spec.HostPID = true, true }, "host namespaces (hostNetwork=true, hostPID=true)"},
		{"hostIPC", Config{}, func(p *corev1.Pod) { p.Spec.HostIPC = true }, "host namespaces (hostIPC=true)"},
		{"hostPort", Config{}, func(p *corev1.Pod) {
			p.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80, HostPort: 80}}
		}, `hostPort (container "app" uses hostPort 80)`},
		{"capabilities", Config{}, func(p *corev1.Pod) {
			p.Spec.Containers[0].SecurityContext.Capabilities.Add = []corev1.Capability{"SYS_ADMIN"}
		}, `non-default capabilities (container "app" must not include "SYS_ADMIN" in securityContext.capabilities.add)`},
		{"hostPath", Config{}, hostPath, "spec.volumes[root]: volume type hostPath may not cross to the remote cluster (allowed: configMap, downwardAPI, emptyDir, projected, secret)"},
		{"hostPath allowed by volumeTypes but not by the level", Config{VolumeTypes: []string{"configMap", "secret", "projected", "emptyDir", "hostPath"}}, hostPath, `hostPath volumes (volume "root")`},
		{"persistentVolumeClaim", Config{}, pvc, "spec.volumes[data]: volume type persistentVolumeClaim may not cross"},
		{"persistentVolumeClaim allowed", Config{VolumeTypes: append([]string{"persistentVolumeClaim"}, DefaultVolumeTypes...)}, pvc, ""},
		{"ephemeral volume", Config{}, func(p *corev1.Pod) {
			p.Spec.Volumes = append(p.Spec.Volumes, corev1.Volume{Name: "scratch", VolumeSource: corev1.VolumeSource{Ephemeral: &corev1.EphemeralVolumeSource{}}})
		}, "spec.volumes[scratch]: volume type ephemeral may not cross"},
		{"projected clusterTrustBundle", Config{}, func(p *corev1.Pod) {
			p.Spec.Volumes[2].Projected.Sources = append(p.Spec.Volumes[2].Projected.Sources, corev1.VolumeProjection{ClusterTrustBundle: &corev1.ClusterTrustBundleProjection{Path: "ca"}})
		}, "spec.volumes[proj].projected.sources[2]: only configMap, secret and downwardAPI sources may cross"},
		{"unmapped runtimeClass", Config{}, func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("gvisor") },
			`spec.runtimeClassName: "gvisor" has no counterpart in the remote cluster (the provider config's runtimeClasses)`},
		{"mapped runtimeClass", Config{RuntimeClasses: map[string]string{"gvisor": "runsc"}}, func(p *corev1.Pod) { p.Spec.RuntimeClassName = ptr.To("gvisor") }, ""},
		{"name past B's limit", Config{}, func(p *corev1.Pod) { p.Name = strings.Repeat("w", 250) }, "must be no more than 253 characters"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			pod := restrictedPod()
			if tt.change != nil {
				tt.change(pod)
			}
			remote, err := testProvider(t, tt.cfg).remotePod(pod)
			switch {
			case tt.want == "" && err != nil:
				t.Fatalf("refused: %v", err)
			case tt.want == "":
				if remote.Spec.RuntimeClassName != nil && *remote.Spec.RuntimeClassName != "runsc" {
					t.Errorf("runtimeClassName %q crossed unmapped", *remote.Spec.RuntimeClassName)
				}
			case err == nil:
				t.Fatalf("crossed, want a refusal containing %q", tt.want)
			case !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), tt.want):
				t.Fatalf("refusal %v (invalid input: %v), want one containing %q", err, errdefs.IsInvalidInput(err), tt.want)
			}
		})
	}
}

// TestRemotePodDropsWhatBRefuses: overhead (B's RuntimeClass admission
// sets its own) and ephemeral containers (B refuses them on create) never
// cross; annotations cross only under the allowed prefixes, never under
// the provider's own.
func TestRemotePodDropsWhatBRefuses(t *testing.T) {
	pod := restrictedPod()
	pod.Spec.RuntimeClassName = ptr.To("kata")
	pod.Spec.Overhead = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("250m")}
	pod.Spec.EphemeralContainers = []corev1.EphemeralContainer{{EphemeralContainerCommon: corev1.EphemeralContainerCommon{Name: "debug", Image: "busybox"}}}
	pod.Annotations = map[string]string{
		"mock.vkubelet.io/run-for":       "1s",
		"k8s.v1.cni.cncf.io/networks":    "host-net",
		"sidecar.istio.io/inject":        "true",
		AnnotationSignature:              "forged",
		"virtual-kubelet.io/source-name": "kube-apiserver",
	}
	p := testProvider(t, Config{RuntimeClasses: map[string]string{"kata": "kata-b"}})
	remote, err := p.remotePod(pod)
	if err != nil {
		t.Fatal(err)
	}
	if remote.Spec.Overhead != nil || remote.Spec.EphemeralContainers != nil || ptr.Deref(remote.Spec.RuntimeClassName, "") != "kata-b" {
		t.Errorf("overhead %v, ephemeral containers %v, runtimeClassName %v", remote.Spec.Overhead, remote.Spec.EphemeralContainers, remote.Spec.RuntimeClassName)
	}
	if len(remote.Annotations) != 3 || remote.Annotations["mock.vkubelet.io/run-for"] != "1s" || remote.Annotations[AnnotationSourceName] != "web" {
		t.Errorf("annotations in B: %v", remote.Annotations)
	}
	if _, _, uid, ok := p.trust.sourceOf(remote); !ok || uid != "uid-1" {
		t.Errorf("B's pod is not taken for this node's: %v", remote.ObjectMeta)
	}
}
