package slurm

import (
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
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
	if _, _, err := p.plan(bad, "/d"); !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), `image "nginx"`) {
		t.Errorf("image outside the table: %v", err)
	}
	hostPath := testPod("p", shell("c", "true"))
	hostPath.Spec.Volumes = []corev1.Volume{{Name: "h", VolumeSource: corev1.VolumeSource{HostPath: &corev1.HostPathVolumeSource{Path: "/"}}}}
	if _, _, err := p.plan(hostPath, "/d"); !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), `volume "h"`) {
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
	_, main, err := p.plan(pod, "/d")
	if err != nil {
		t.Fatal(err)
	}
	a, b := main[0], main[1]
	if !slices.Equal(a.argv, []string{"python3", "-c", "print(1)"}) || a.root != "/" {
		t.Errorf("prefix image: %+v", a)
	}
	// Host images hide the work directory; emptyDirs are writable.
	if !slices.Equal(a.mounts, []string{"", "/srv/vk", "tmpfs", "/d/empty/e/sub", "/e", "rw"}) {
		t.Errorf("mounts %q", a.mounts)
	}
	if b.root != "/srv/debian" || !slices.Equal(b.mounts, []string{"/d/vol/cm", "/etc/cfg", "ro"}) {
		t.Errorf("root image: %+v", b)
	}
}

func TestSbatchArgs(t *testing.T) {
	p := planProvider()
	pod := testPod("p", shell("a", "true"), shell("b", "true"))
	pod.Spec.Containers[0].Resources.Requests = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1500m"), corev1.ResourceMemory: resource.MustParse("1Gi")}
	pod.Spec.Containers[1].Resources.Limits = corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("1"), corev1.ResourceMemory: resource.MustParse("100M")}
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](61)
	pod.Annotations = map[string]string{AnnotationSbatchPrefix + "constraint": "avx512", AnnotationSbatchPrefix + "exclusive": ""}
	args, err := p.sbatchArgs(pod, "/d")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--cpus-per-task=3", "--mem=1120M", "--time=3", "--partition=batch", "--constraint=avx512", "--exclusive", "--comment=vk-pod:" + string(pod.UID), "--job-name=vk_n"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	for ann, want := range map[string]string{
		AnnotationSbatchPrefix + "uid":        `sbatch option "uid" is not allowed`,
		AnnotationSbatchPrefix + "constraint": "must be one line",
	} {
		pod.Annotations = map[string]string{ann: "0\n#SBATCH --uid=0"}
		if _, err := p.sbatchArgs(pod, "/d"); !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), want) {
			t.Errorf("annotation %s: %v, want %q", ann, err, want)
		}
	}
}
