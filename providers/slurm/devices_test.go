package slurm

import (
	"context"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// TestParseGres: sinfo's GRES strings, with types, socket lists and
// several entries, and the ones refused, each named.
func TestParseGres(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want []gresUnit
		err  string
	}{
		{in: "", want: nil},
		{in: "(null)", want: nil},
		{in: "gpu:fake:4", want: []gresUnit{{"gpu", "fake", 4}}},
		{in: "gpu:a100:2(S:0-1,3),gpu:v100:1(S:0),mps:400", want: []gresUnit{{"gpu", "a100", 2}, {"gpu", "v100", 1}, {"mps", "", 400}}},
		{in: "gpu:2", want: []gresUnit{{"gpu", "", 2}}},
		{in: "gpu", err: `GRES "gpu": want name[:type]:count`},
		{in: "gpu:a:b:1", err: `GRES "gpu:a:b:1": want name[:type]:count`},
		{in: "gpu:x:-1", err: "count must be a whole number"},
		{in: "gpu:x:+1", err: "count must be a whole number"},
		{in: "bw:2000P", err: "of at most 2^50"},
		{in: "bw:lustre:4G", want: []gresUnit{{"bw", "lustre", 4 << 30}}},
		{in: "gpu:x:K", err: "count must be a whole number"},
		{in: ":x:1", err: "no name"},
		{in: "gpu:1(S:0", err: "unbalanced parenthesis"},
	} {
		got, err := parseGres(tc.in)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("parseGres(%q) = %v, %v; want an error saying %q", tc.in, got, err, tc.err)
			}
			continue
		}
		if err != nil || !reflect.DeepEqual(got, tc.want) {
			t.Errorf("parseGres(%q) = %+v, %v; want %+v", tc.in, got, err, tc.want)
		}
	}
}

// gresProvider is a provider whose Slurm nodes c1 (two a100 and one v100
// GPUs, and MPS shares, which are not published) and c2 (one GPU) are the
// virtual node vk's devices.
func gresProvider(t *testing.T) withDevices {
	t.Helper()
	d, err := devicesOf("vk", []slurmNode{
		{Name: "c1", Gres: "gpu:a100:2(S:0),gpu:v100:1,mps:200"},
		{Name: "c2", Gres: "gpu:1"},
		{Name: "c3", Gres: "mps:100"},
	}, DefaultDeviceGres)
	if err != nil {
		t.Fatal(err)
	}
	p := planProvider()
	p.devices = d
	return withDevices{p}
}

// TestDevicesOfGres: one driver for the GRES gpu, a pool per Slurm node
// that has GPUs, named after the virtual node and the Slurm node; each
// unit a device with its type and its index among the node's GPUs.
func TestDevicesOfGres(t *testing.T) {
	p := gresProvider(t)
	var got []node.DeviceDriver
	p.NotifyDevices(context.Background(), func(d []node.DeviceDriver) { got = d })
	if len(got) != 1 || got[0].Name != GPUDriver || len(got[0].Pools) != 2 {
		t.Fatalf("drivers %+v, want %s with two pools", got, GPUDriver)
	}
	var seen []string
	for _, pool := range got[0].Pools {
		for _, d := range pool.Devices {
			typ := ""
			if a := d.Attributes["type"].StringValue; a != nil {
				typ = *a
			}
			seen = append(seen, pool.Name+"/"+d.Name+":"+typ+":"+*d.Attributes["node"].StringValue+":"+strconv.FormatInt(*d.Attributes["index"].IntValue, 10))
		}
	}
	want := []string{"vk/c1/gpu-0:a100:c1:0", "vk/c1/gpu-1:a100:c1:1", "vk/c1/gpu-2:v100:c1:2", "vk/c2/gpu-0::c2:0"}
	if !slices.Equal(seen, want) {
		t.Errorf("devices %q, want %q", seen, want)
	}
	if _, err := devicesOf("vk", []slurmNode{{Name: "Bad_Name", Gres: "gpu:1"}}, DefaultDeviceGres); err == nil || !strings.Contains(err.Error(), `node "Bad_Name" has GRES gpu but its name cannot name a device pool`) {
		t.Errorf("a node name that is no pool name: %v", err)
	}
	if _, err := devicesOf("vk", []slurmNode{{Name: "c1", Gres: "gpu:a:100,gpu:b:29"}}, DefaultDeviceGres); err == nil || !strings.Contains(err.Error(), `node "c1": more units of GRES gpu than the 128 devices a pool holds`) {
		t.Errorf("129 GPUs on a node: %v", err)
	}
	if d, err := devicesOf("vk", []slurmNode{{Name: "c1", Gres: "gpu:2"}}, []string{"fpga"}); err != nil || len(d.drivers) != 0 {
		t.Errorf("GRES not published: %+v, %v", d, err)
	}
}

func allocated(pool, device string) node.AllocatedDevice {
	return node.AllocatedDevice{Claim: "gpu", ClaimName: "p-gpu", Request: "gpu", Driver: GPUDriver, Pool: pool, Device: device}
}

// TestPreparedDevicesBecomeGres: a pod's devices become one --gres with a
// count per type, joined with the extended resources' GRES, and the job
// is placed on their Slurm node; each container's GPUs and the pod's are
// in the plan.
func TestPreparedDevicesBecomeGres(t *testing.T) {
	p := gresProvider(t)
	p.cfg.Gres = map[string]string{"example.com/fpga": "fpga"}
	pod := testPod("p", shell("a", "true"), shell("b", "true"))
	pod.Spec.Containers[1].Resources.Limits = corev1.ResourceList{"example.com/fpga": resource.MustParse("1")}
	devs := []node.AllocatedDevice{allocated("vk/c1", "gpu-1"), allocated("vk/c1", "gpu-2"), allocated("vk/c1", "gpu-0")}
	if err := p.PrepareDevices(context.Background(), pod, node.PodDevices{
		Devices:    devs,
		Containers: map[string][]node.AllocatedDevice{"a": devs[:2], "b": devs[2:]},
	}); err != nil {
		t.Fatal(err)
	}
	args, err := p.sbatchArgs(pod, &tenant{}, "/d")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"--gres=fpga:1,gpu:a100:2,gpu:v100:1", "--nodelist=c1"} {
		if !slices.Contains(args, want) {
			t.Errorf("args %q lack %s", args, want)
		}
	}
	all, containers := p.gpuPlan(pod)
	if all != "0,1,2" || !reflect.DeepEqual(containers, map[string]string{"a": "1,2", "b": "0"}) {
		t.Errorf("gpu plan %q %v", all, containers)
	}

	// Another pod of the same name is not given them; once the job is
	// submitted they are forgotten.
	other := testPod("p", shell("a", "true"))
	if args, _ := p.sbatchArgs(other, &tenant{}, "/d"); slices.ContainsFunc(args, func(a string) bool { return strings.HasPrefix(a, "--gres=gpu") }) {
		t.Errorf("a pod with another UID got the devices: %q", args)
	}
	p.forgetDevices(pod)
	if all, _ := p.gpuPlan(pod); all != "" {
		t.Errorf("devices still planned once forgotten: %q", all)
	}
}

// TestPrepareDevicesRefuses: a device the node does not publish, or
// devices on two Slurm nodes, fail the pod (InvalidInput) naming them.
func TestPrepareDevicesRefuses(t *testing.T) {
	p := gresProvider(t)
	pod := testPod("p", shell("a", "true"))
	for _, tc := range []struct {
		devs []node.AllocatedDevice
		want string
	}{
		{[]node.AllocatedDevice{allocated("vk/c1", "gpu-9")}, "device gpu.slurm.vkubelet.io/vk/c1/gpu-9 is not a GRES of this node's Slurm nodes"},
		{[]node.AllocatedDevice{allocated("other/c1", "gpu-0")}, "device gpu.slurm.vkubelet.io/other/c1/gpu-0 is not"},
		{[]node.AllocatedDevice{allocated("vk/c1", "gpu-0"), allocated("vk/c2", "gpu-0")}, "devices on Slurm nodes c1 and c2: a pod's job runs on one node"},
	} {
		err := p.PrepareDevices(context.Background(), pod, node.PodDevices{Devices: tc.devs})
		if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("devices %+v: %v, want InvalidInput saying %q", tc.devs, err, tc.want)
		}
	}
}

// TestConfigDevices: devices defaults to [gpu], [] publishes none, and a
// GRES named twice or not a DNS label is a one-line error naming it.
func TestConfigDevices(t *testing.T) {
	good := "workDir: /srv/vk\nimages: {busybox: {host: true}}\n"
	load := func(extra string) (*Config, error) {
		path := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(path, []byte(good+extra), 0o600); err != nil {
			t.Fatal(err)
		}
		return LoadConfig(path)
	}
	if c, err := load(""); err != nil || !slices.Equal(c.Devices, []string{"gpu"}) || !slices.Equal(c.GPUFiles, DefaultGPUFiles) {
		t.Errorf("default devices %v, %v", c, err)
	}
	if c, err := load("devices: []\n"); err != nil || len(c.Devices) != 0 {
		t.Errorf("devices: [] gives %v, %v", c, err)
	}
	for extra, want := range map[string]string{
		"devices: [gpu, gpu]\n":  `devices: GRES "gpu" declared twice`,
		"devices: [GPU]\n":       `devices[0]: "GPU" is not a GRES name`,
		"gpuFiles: [dev/gpu0]\n": `gpuFiles[0]: must be a clean absolute path of a device file, got "dev/gpu0"`,
	} {
		_, err := load(extra)
		if err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "\n") {
			t.Errorf("%s: %v, want one line saying %s", extra, err, want)
		}
	}
}
