package slurm

import (
	"strconv"
	"strings"
	"testing"

	resourcev1 "k8s.io/api/resource/v1"

	"github.com/vkubelet/virtual-kubelet/node"
)

// FuzzGresDevices: whatever GRES string sinfo gives a node, parseGres and
// devicesOf do not panic; a refusal names sinfo --json; what they accept
// is as many GPU devices as the gpu entries count, at most a pool's worth,
// named gpu-0, gpu-1, ... with those indexes, in a pool of the virtual
// node and that Slurm node.
func FuzzGresDevices(f *testing.F) {
	for _, seed := range []string{
		"gpu:fake:4",
		"gpu:a100:2(S:0-1,3),gpu:v100:1(S:0),mps:400",
		"gpu:2,shard:8K,bandwidth:lustre:4G",
		"gpu:a:100,gpu:b:29",
		"(null)",
		"gpu:1(S:0",
		"gpu:x:-1",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, gres string) {
		units, err := parseGres(gres)
		d, derr := devicesOf("vk", []slurmNode{{Name: "c1", Gres: gres}}, DefaultDeviceGres)
		if (err == nil) != (derr == nil) && !strings.Contains(derr.Error(), "devices a pool holds") {
			t.Fatalf("parseGres: %v, devicesOf: %v", err, derr)
		}
		if derr != nil {
			if !strings.HasPrefix(derr.Error(), "sinfo --json: ") {
				t.Fatalf("the error does not name sinfo --json: %v", derr)
			}
			return
		}
		var gpus int64
		for _, u := range units {
			if u.count < 0 {
				t.Fatalf("GRES %q: negative count in %+v", gres, u)
			}
			if u.name == "gpu" {
				gpus += u.count
			}
		}
		var devices []resourcev1.Device
		for _, drv := range d.drivers {
			if drv.Name != GPUDriver || len(drv.Pools) != 1 || drv.Pools[0].Name != "vk/c1" {
				t.Fatalf("GRES %q: driver %+v", gres, drv)
			}
			devices = append(devices, drv.Pools[0].Devices...)
		}
		if int64(len(devices)) != gpus || len(devices) > resourcev1.ResourceSliceMaxDevices {
			t.Fatalf("GRES %q: %d devices for %d GPUs", gres, len(devices), gpus)
		}
		if err := node.ValidateDevices(d.drivers); err != nil {
			t.Fatalf("GRES %q: %v", gres, err)
		}
		for i, dev := range devices {
			if idx := dev.Attributes["index"].IntValue; idx == nil || *idx != int64(i) || dev.Name != "gpu-"+strconv.Itoa(i) {
				t.Fatalf("GRES %q: device %d is %+v", gres, i, dev)
			}
		}
	})
}
