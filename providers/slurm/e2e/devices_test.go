//go:build e2e

package e2e_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/slurm"
)

// gpuClassFile is the DeviceClass hack/deploy ships for the Slurm GPUs.
const gpuClassFile = "../../../hack/deploy/devices/slurm-gpu.yaml"

// oneGPU is a ResourceClaimTemplate for one device of the Slurm GPU class,
// of the type hack/slurm/slurm.sh gives its fake GPUs.
var oneGPU = daemontest.ClaimTemplate("one-gpu", "gpu.slurm.vkubelet.io", `device.attributes["gpu.slurm.vkubelet.io"].type == "fake"`)

// TestGresDevices: a Slurm node with two fake GPUs (gres.conf File=
// entries) publishes them as the virtual node's ResourceSlice; a pod
// claiming one through a ResourceClaimTemplate is scheduled by the
// kube-scheduler, runs as a job that Slurm allocated the GRES (scontrol
// show job), and its container sees that GPU in CUDA_VISIBLE_DEVICES and
// its device file in /dev; the pod's container without the claim sees
// neither.
func TestGresDevices(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	n := slurmtest.NewNode(t, c, slurmtest.Tenants{slurmtest.TenantA: {ns}}, "SLURM_GPUS=2")
	// The fake GPUs' device files, as gres.conf names them.
	f, err := os.OpenFile(n.Config, os.O_APPEND|os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("gpuFiles: [\"" + n.Dir + "/dev/gpu{index}\"]\n"); err != nil {
		t.Fatal(err)
	}
	f.Close()
	daemontest.ApplyShipped(t, c, gpuClassFile)
	n.Start(t)
	n.WaitReady(t)
	daemontest.Apply(t, c, ns, oneGPU)

	pool := n.Name + "/vk-slurm"
	slurmtest.Eventually(t, "the node's ResourceSlice with gpu-0 and gpu-1", func() (bool, string) {
		list, err := c.Client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorNodeName, n.Name).String(),
		})
		if err != nil {
			return false, err.Error()
		}
		var names []string
		for _, s := range list.Items {
			if s.Spec.Driver != slurm.GPUDriver || s.Spec.Pool.Name != pool {
				return false, "slice " + s.Name + " of driver " + s.Spec.Driver + " pool " + s.Spec.Pool.Name
			}
			for _, d := range s.Spec.Devices {
				if typ := d.Attributes["type"].StringValue; typ == nil || *typ != "fake" || d.Attributes["index"].IntValue == nil {
					return false, "device " + d.Name + " without type fake and an index"
				}
				names = append(names, d.Name)
			}
		}
		return strings.Join(names, ",") == "gpu-0,gpu-1", strings.Join(names, ",")
	})

	const show = `echo "cuda=$CUDA_VISIBLE_DEVICES rocr=$ROCR_VISIBLE_DEVICES dev=$(cd /dev && echo gpu*)"; while :; do sleep 1; done`
	main := slurmtest.Shell("main", show)
	main.Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	other := slurmtest.Shell("other", show)
	pod := n.Pod(ns, "gpu", main, other)
	pod.Spec.NodeName = ""
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: n.Name}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
	pod.Spec.TerminationGracePeriodSeconds = ptr.To[int64](0)
	n.Create(t, pod)
	pod = n.WaitPod(t, ns, "gpu", "Running", daemontest.Running)

	if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("resourceClaimStatuses %+v", pod.Status.ResourceClaimStatuses)
	}
	claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(context.Background(), *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if a := claim.Status.Allocation; a == nil || len(a.Devices.Results) != 1 || a.Devices.Results[0].Pool != pool {
		t.Fatalf("claim %s: allocation %+v, want one device of pool %s", claim.Name, claim.Status.Allocation, pool)
	}
	device := claim.Status.Allocation.Devices.Results[0].Device
	index := strings.TrimPrefix(device, "gpu-")

	var jobID string
	for _, line := range strings.Split(n.Slurm(t, "squeue", "--noheader", "--format=%i %k"), "\n") {
		if id, comment, ok := strings.Cut(strings.TrimSpace(line), " "); ok && comment == "vk-pod:"+string(pod.UID) {
			jobID = id
		}
	}
	if jobID == "" {
		t.Fatal("squeue shows no job of the pod")
	}
	job := n.Slurm(t, "scontrol", "show", "job", "-d", jobID)
	if !strings.Contains(job, "JOB_GRES=gpu:fake:1") || !strings.Contains(job, "GRES=gpu:fake:1(IDX:"+index+")") {
		t.Errorf("scontrol show job -d %s does not show gpu:fake:1 at index %s (the claim's %s):\n%s", jobID, index, device, job)
	}
	slurmtest.Eventually(t, "the container with the claim sees its GPU, in its env and its /dev", func() (bool, string) {
		out, _ := c.Kubectl(context.Background(), "-n", ns, "logs", "gpu", "-c", "main")
		return out == "cuda="+index+" rocr="+index+" dev=gpu"+index+"\n", out
	})
	slurmtest.Eventually(t, "the container without it sees none", func() (bool, string) {
		out, _ := c.Kubectl(context.Background(), "-n", ns, "logs", "gpu", "-c", "other")
		return out == "cuda= rocr= dev=gpu*\n", out
	})
}

// TestDeviceGresTwiceIsOneLineError: a config naming a GRES twice in
// devices stops the daemon at start with one line naming it.
func TestDeviceGresTwiceIsOneLineError(t *testing.T) {
	c := testcluster.Shared(t)
	cfg := filepath.Join(t.TempDir(), "slurm.yaml")
	if err := os.WriteFile(cfg, []byte("workDir: /tmp/vk-dup\nimages: {busybox: {host: true}}\ndevices: [gpu, gpu]\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := daemontest.Run(t, "--provider", "slurm", "--nodename", "vk-dup", "--node-ip", "127.0.0.1", "--metrics-addr", "",
		"--kubeconfig", c.Info.Kubeconfig, "--provider-config", cfg)
	if code == 0 || strings.Contains(out, "\n") || !strings.Contains(out, `devices: GRES "gpu" declared twice`) {
		t.Errorf("exit %d, output:\n%s\nwant one line naming GRES gpu declared twice", code, out)
	}
}
