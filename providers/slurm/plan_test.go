package slurm

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

func planProvider() *Provider {
	return &Provider{cfg: &Config{WorkDir: "/srv/vk", Partition: "batch", Images: map[string]Image{
		"busybox": {Host: true}, "py": {Prefix: []string{"python3", "-c"}}, "debian": {Root: "/srv/debian"},
	}}, jobName: "vk_n"}
}

// TestPlanRefusesWhatItCannotRun: images outside the table and volume
// kinds the node cannot provide are InvalidInput errors naming them.
func TestPlanRefusesWhatItCannotRun(t *testing.T) {
	p := planProvider()
	bad := testPod("p", corev1.Container{Name: "c", Image: "nginx"})
	if _, _, err := p.plan(bad); !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), `image "nginx"`) {
		t.Errorf("image outside the table: %v", err)
	}
	hostPath := testPod("p", shell("c", "true"))
	hostPath.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	if _, _, err := p.plan(hostPath); !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), `volume "h"`) {
		t.Errorf("hostPath volume: %v", err)
	}
}

func TestPlanMapsImagesAndMounts(t *testing.T) {
	p := planProvider()
	pod := testPod("p",
		corev1.Container{Name: "a", Image: "py", Args: []string{"print(1)"}, VolumeMounts: []corev1.VolumeMount{{Name: "e", MountPath: "/e/", SubPath: "sub"}}},
		corev1.Container{Name: "b", Image: "debian", Command: []string{"/bin/true"}, VolumeMounts: []corev1.VolumeMount{{Name: "cm", MountPath: "/etc/cfg"}}},
	)
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "e", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
		{Name: "cm", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{}}},
	}
	_, main, err := p.plan(pod)
	if err != nil {
		t.Fatal(err)
	}
	a, b := main[0], main[1]
	if !slices.Equal(a.argv, []string{"python3", "-c", "print(1)"}) || a.root != "" {
		t.Errorf("prefix image: %+v", a)
	}
	// The subPath stays as the pod gave it: the launcher resolves it
	// beneath the volume when it binds it. emptyDirs are writable.
	if !slices.Equal(a.mounts, []string{"empty/e", "sub", "/e", "rw"}) {
		t.Errorf("mounts %q", a.mounts)
	}
	if b.root != "/srv/debian" || !slices.Equal(b.mounts, []string{"vol/cm", "", "/etc/cfg", "ro"}) {
		t.Errorf("root image: %+v", b)
	}
}

func TestSbatchArgs(t *testing.T) {
	p := planProvider()
	pod := testPod("p", shell("a", "true"), shell("b", "true"))
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	pod.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("100M")}
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](61)
	pod.Annotations = map[string]string{AnnotationSbatchPrefix + "constraint": "avx512", AnnotationSbatchPrefix + "exclusive": "",
		AnnotationSbatchPrefix + "reservation": "maint", AnnotationSbatchPrefix + "licenses": "matlab:2", AnnotationSbatchPrefix + "qos": "high"}
	tn := &tenant{uid: 1001, gid: 1001, account: "physics", partition: "batch", qos: "normal", allow: Allow{
		Annotations: []string{"constraint", "exclusive", "nice"}, Reservations: []string{"maint"}, Licenses: []string{"matlab"}, QOS: []string{"normal", "high"}}}
	args, err := p.sbatchArgs(pod, tn, "/d")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--cpus-per-task=3", "--mem=1120M", "--time=3", "--partition=batch", "--account=physics", "--qos=high", "--constraint=avx512", "--exclusive",
		"--reservation=maint", "--licenses=matlab:2", "--comment=vk-pod:" + string(pod.UID), "--job-name=vk_n"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	if slices.Contains(args, "--qos=normal") {
		t.Errorf("args %q: the pod's qos annotation must replace the default", args)
	}
	for _, tc := range []struct{ ann, value, want string }{
		{"uid", "0", `sbatch option "uid" is not allowed`},
		{"constraint", "0\n#SBATCH --uid=0", "must be one line"},
		{"nice", "-10", "nice must be a whole number from 0"},
		{"nice", "x", "nice must be a whole number from 0"},
		{"reservation", "other", `reservation "other" is not one this namespace may use`},
		{"licenses", "matlab:1,fluent", `license "fluent" is not one this namespace may use`},
		{"licenses", "matlab:-1", `license count "-1" must be a positive number`},
		{"partition", "gpu", `partition "gpu" is not one this namespace may use`},
		{"time-min", "10", `sbatch option "time-min" is not allowed for this namespace`},
		{"gres", "gpu:8", `sbatch option "gres" is not allowed`},
		{"exclusive", "all", "exclusive takes no value, user or mcs"},
	} {
		pod.Annotations = map[string]string{AnnotationSbatchPrefix + tc.ann: tc.value}
		_, err := p.sbatchArgs(pod, tn, "/d")
		if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), AnnotationSbatchPrefix+tc.ann) {
			t.Errorf("annotation %s=%q: %v, want an InvalidInput naming it and saying %q", tc.ann, tc.value, err, tc.want)
		}
	}
}

// TestGresArgs: extended resources become --gres by the node's map, counted
// as a kubelet counts them; one the node does not map is refused.
func TestGresArgs(t *testing.T) {
	p := planProvider()
	p.cfg.Gres = map[string]string{"nvidia.com/gpu": "gpu"}
	pod := testPod("p", shell("a", "true"), shell("b", "true"))
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("2")}
	pod.Spec.Containers[1].Resources.Limits = corev1.ResourceList{"nvidia.com/gpu": resource.MustParse("1"), corev1.ResourceCPU: resource.MustParse("1")}
	args, err := p.gresArgs(pod)
	if err != nil || !slices.Equal(args, []string{"gpu:3"}) {
		t.Errorf("gres specs %q, %v, want gpu:3", args, err)
	}
	pod.Spec.Containers[0].Resources.Limits = corev1.ResourceList{"example.com/fpga": resource.MustParse("1")}
	if _, err := p.gresArgs(pod); !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "resource example.com/fpga: this Slurm node maps no GRES to it") {
		t.Errorf("an unmapped extended resource: %v", err)
	}
}

func testPod(name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID(uuid.NewUUID())},
		Spec:       corev1.PodSpec{Containers: containers, RestartPolicy: corev1.RestartPolicyNever},
	}
}

func shell(name, script string) corev1.Container {
	return corev1.Container{Name: name, Image: "busybox", Command: []string{"sh", "-c", script}}
}
