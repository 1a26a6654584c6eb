package wire

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
)

// seedDrivers are a driver with two devices with attributes and capacity.
func seedDrivers() []node.DeviceDriver {
	dev := func(name, model string) resourcev1.Device {
		return resourcev1.Device{
			Name:       name,
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"model": {StringValue: ptr.To(model)}, "index": {IntValue: ptr.To[int64](0)}},
		}
	}
	return []node.DeviceDriver{{Name: "gpu.example.com", Pools: []node.DevicePool{{Name: "vk0", Devices: []resourcev1.Device{dev("gpu-0", "h100"), dev("gpu-1", "h200")}}}}}
}

// seedPodDevices are the devices of seedPod's container app: one device
// of claim gpus, with a config.
func seedPodDevices() node.PodDevices {
	d := node.AllocatedDevice{
		Claim: "gpus", ClaimName: "web-gpus-x", Request: "gpu", Driver: "gpu.example.com", Pool: "vk0", Device: "gpu-1",
		Config: []resourcev1.DeviceAllocationConfiguration{{Source: resourcev1.AllocationConfigSourceClaim, DeviceConfiguration: resourcev1.DeviceConfiguration{
			Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "gpu.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{"mode":"shared"}`)}},
		}}},
	}
	return node.PodDevices{Devices: []node.AllocatedDevice{d}, Containers: map[string][]node.AllocatedDevice{"app": {d}}}
}

func TestDevicesRoundTrip(t *testing.T) {
	ev, err := DevicesToProto(seedDrivers())
	if err != nil {
		t.Fatal(err)
	}
	got, err := DevicesFromProto(ev)
	if err != nil || !equality.Semantic.DeepEqual(got, seedDrivers()) {
		t.Fatalf("devices read back as %+v (%v)", got, err)
	}

	pod := seedPod()
	req, err := PrepareDevicesToProto(pod, seedPodDevices())
	if err != nil {
		t.Fatal(err)
	}
	gotPod, devices, err := PrepareDevicesFromProto(req)
	if err != nil || gotPod.Name != pod.Name || !equality.Semantic.DeepEqual(devices, seedPodDevices()) {
		t.Fatalf("PrepareDevices request read back as %+v, %+v (%v)", gotPod, devices, err)
	}
}

func TestDevicesRefused(t *testing.T) {
	twice := seedDrivers()
	twice[0].Pools[0].Devices[1].Name = "gpu-0"
	ev, err := DevicesToProto(twice)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DevicesFromProto(ev); err == nil || !strings.Contains(err.Error(), `device "gpu-0" declared twice`) {
		t.Errorf("a device named twice: %v", err)
	}

	req, err := PrepareDevicesToProto(seedPod(), seedPodDevices())
	if err != nil {
		t.Fatal(err)
	}
	for name, tc := range map[string]struct {
		edit func(*pb.PrepareDevicesRequest)
		want string
	}{
		"index out of range":  {func(r *pb.PrepareDevicesRequest) { r.Containers[0].Devices = []uint32{7} }, `container "app": device index 7, but the request has 1 devices`},
		"unknown container":   {func(r *pb.PrepareDevicesRequest) { r.Containers[0].Container = "sidecar" }, `container "sidecar" is not one of the pod's`},
		"container twice":     {func(r *pb.PrepareDevicesRequest) { r.Containers = append(r.Containers, r.Containers[0]) }, `container "app" listed twice`},
		"device without pool": {func(r *pb.PrepareDevicesRequest) { r.Devices[0].Pool = "" }, `devices[0]: driver, pool and device must all be named`},
		"garbage config":      {func(r *pb.PrepareDevicesRequest) { r.Devices[0].Config = [][]byte{{0xff}} }, `devices[0], config[0]: malformed`},
	} {
		r := proto.Clone(req).(*pb.PrepareDevicesRequest)
		tc.edit(r)
		if _, _, err := PrepareDevicesFromProto(r); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v, want an error with %q", name, err, tc.want)
		}
	}
}

// FuzzDevicesFromProto: whatever a plugin sends on WatchDevices, reading
// it does not panic, and what is accepted has no name twice and reads the
// same once written again.
func FuzzDevicesFromProto(f *testing.F) {
	ev, err := DevicesToProto(seedDrivers())
	if err != nil {
		f.Fatal(err)
	}
	data, err := proto.Marshal(ev)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte{0x0a, 0x02, 0x12, 0x00})
	f.Fuzz(func(t *testing.T, data []byte) {
		var ev pb.DevicesEvent
		if proto.Unmarshal(data, &ev) != nil {
			return
		}
		drivers, err := DevicesFromProto(&ev)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "WatchDevices event") {
				t.Fatalf("the error does not name the event: %v", err)
			}
			return
		}
		if err := node.ValidateDevices(drivers); err != nil {
			t.Fatalf("accepted devices that do not validate: %v", err)
		}
		out, err := DevicesToProto(drivers)
		if err != nil {
			t.Fatalf("accepted devices do not write again: %v", err)
		}
		again, err := DevicesFromProto(out)
		if err != nil || !equality.Semantic.DeepEqual(drivers, again) {
			t.Fatalf("accepted devices read different once written again (%v)", err)
		}
	})
}

// FuzzPrepareDevicesFromProto: whatever PrepareDevices request reaches a
// plugin, reading it does not panic, every container's device is one of
// the request's, and what is read reads the same once written again.
func FuzzPrepareDevicesFromProto(f *testing.F) {
	pod := seedPod()
	pod.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	req, err := PrepareDevicesToProto(pod, seedPodDevices())
	if err != nil {
		f.Fatal(err)
	}
	data, err := proto.Marshal(req)
	if err != nil {
		f.Fatal(err)
	}
	f.Add(data)
	f.Add([]byte{0x1a, 0x05, 0x0a, 0x01, 0x61, 0x10, 0x09})
	f.Fuzz(func(t *testing.T, data []byte) {
		var in pb.PrepareDevicesRequest
		if proto.Unmarshal(data, &in) != nil {
			return
		}
		pod, devices, err := PrepareDevicesFromProto(&in)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "PrepareDevices request") {
				t.Fatalf("the error does not name the request: %v", err)
			}
			return
		}
		out, err := PrepareDevicesToProto(pod, devices)
		if err != nil {
			t.Fatalf("a request read does not write again: %v", err)
		}
		_, again, err := PrepareDevicesFromProto(out)
		if err != nil || !equality.Semantic.DeepEqual(devices, again) {
			t.Fatalf("a request read reads different once written again (%v):\nfirst  %+v\nsecond %+v", err, devices, again)
		}
	})
}
