package wire

import (
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/podspec"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
)

// DevicesToProto is the WatchDevices event of drivers.
func DevicesToProto(drivers []node.DeviceDriver) (*pb.DevicesEvent, error) {
	ev := &pb.DevicesEvent{}
	for _, d := range drivers {
		pd := &pb.DeviceDriver{Name: d.Name}
		for _, pool := range d.Pools {
			pp := &pb.DevicePool{Name: pool.Name}
			for i := range pool.Devices {
				data, err := Encode(&pool.Devices[i])
				if err != nil {
					return nil, fmt.Errorf("driver %q, pool %q, device %q: %w", d.Name, pool.Name, pool.Devices[i].Name, err)
				}
				pp.Devices = append(pp.Devices, data)
			}
			pd.Pools = append(pd.Pools, pp)
		}
		ev.Drivers = append(ev.Drivers, pd)
	}
	return ev, nil
}

// DevicesFromProto reads a WatchDevices event. Besides malformed bytes,
// a driver, pool or device named twice is refused (node.ValidateDevices):
// the daemon would publish slices no claim could name.
func DevicesFromProto(ev *pb.DevicesEvent) ([]node.DeviceDriver, error) {
	drivers := make([]node.DeviceDriver, 0, len(ev.GetDrivers()))
	for _, pd := range ev.GetDrivers() {
		d := node.DeviceDriver{Name: pd.GetName()}
		for _, pp := range pd.GetPools() {
			pool := node.DevicePool{Name: pp.GetName(), Devices: make([]resourcev1.Device, 0, len(pp.GetDevices()))}
			for i, data := range pp.GetDevices() {
				dev, err := Decode[resourcev1.Device](fmt.Sprintf("WatchDevices event, driver %q, pool %q, devices[%d]", d.Name, pool.Name, i), data)
				if err != nil {
					return nil, err
				}
				pool.Devices = append(pool.Devices, *dev)
			}
			d.Pools = append(d.Pools, pool)
		}
		drivers = append(drivers, d)
	}
	if err := node.ValidateDevices(drivers); err != nil {
		return nil, fmt.Errorf("WatchDevices event: %w", err)
	}
	return drivers, nil
}

// PrepareDevicesToProto is the PrepareDevices request for pod's devices.
// A container's devices travel as indexes into the request's devices.
func PrepareDevicesToProto(pod *corev1.Pod, devices node.PodDevices) (*pb.PrepareDevicesRequest, error) {
	data, err := Encode(pod)
	if err != nil {
		return nil, fmt.Errorf("pod: %w", err)
	}
	req := &pb.PrepareDevicesRequest{Pod: data}
	for _, d := range devices.Devices {
		ad := &pb.AllocatedDevice{Claim: d.Claim, ClaimName: d.ClaimName, Request: d.Request, Driver: d.Driver, Pool: d.Pool, Device: d.Device}
		for i := range d.Config {
			c, err := Encode(&d.Config[i])
			if err != nil {
				return nil, fmt.Errorf("device %s, config[%d]: %w", d.ID(), i, err)
			}
			ad.Config = append(ad.Config, c)
		}
		req.Devices = append(req.Devices, ad)
	}
	// In the pod's container order, so the request is the same each time.
	for _, c := range podspec.AllContainers(pod) {
		name := c.Name
		devs, ok := devices.Containers[name]
		if !ok {
			continue
		}
		cd := &pb.ContainerDevices{Container: name}
		for _, d := range devs {
			i := slices.IndexFunc(devices.Devices, func(a node.AllocatedDevice) bool { return sameDevice(a, d) })
			if i < 0 {
				return nil, fmt.Errorf("container %q: device %s is not among the pod's devices", name, d.ID())
			}
			cd.Devices = append(cd.Devices, uint32(i))
		}
		req.Containers = append(req.Containers, cd)
	}
	return req, nil
}

// PrepareDevicesFromProto reads a PrepareDevices request; what is
// malformed is named.
func PrepareDevicesFromProto(in *pb.PrepareDevicesRequest) (*corev1.Pod, node.PodDevices, error) {
	const what = "PrepareDevices request"
	pod, err := DecodePod(what+", pod", in.GetPod())
	if err != nil {
		return nil, node.PodDevices{}, err
	}
	out := node.PodDevices{Containers: map[string][]node.AllocatedDevice{}}
	for i, ad := range in.GetDevices() {
		d := node.AllocatedDevice{
			Claim: ad.GetClaim(), ClaimName: ad.GetClaimName(), Request: ad.GetRequest(),
			Driver: ad.GetDriver(), Pool: ad.GetPool(), Device: ad.GetDevice(),
		}
		if d.Driver == "" || d.Pool == "" || d.Device == "" {
			return nil, node.PodDevices{}, fmt.Errorf("%s, devices[%d]: driver, pool and device must all be named", what, i)
		}
		if slices.ContainsFunc(out.Devices, func(a node.AllocatedDevice) bool { return sameDevice(a, d) }) {
			return nil, node.PodDevices{}, fmt.Errorf("%s, devices[%d]: device %s of claim %q, request %q, listed twice", what, i, d.ID(), d.Claim, d.Request)
		}
		for j, data := range ad.GetConfig() {
			c, err := Decode[resourcev1.DeviceAllocationConfiguration](fmt.Sprintf("%s, devices[%d], config[%d]", what, i, j), data)
			if err != nil {
				return nil, node.PodDevices{}, err
			}
			d.Config = append(d.Config, *c)
		}
		out.Devices = append(out.Devices, d)
	}
	for _, cd := range in.GetContainers() {
		name := cd.GetContainer()
		if !slices.ContainsFunc(podspec.AllContainers(pod), func(c *corev1.Container) bool { return c.Name == name }) {
			return nil, node.PodDevices{}, fmt.Errorf("%s: container %q is not one of the pod's", what, name)
		}
		if _, dup := out.Containers[name]; dup {
			return nil, node.PodDevices{}, fmt.Errorf("%s: container %q listed twice", what, name)
		}
		devs := make([]node.AllocatedDevice, 0, len(cd.GetDevices()))
		for _, i := range cd.GetDevices() {
			if int(i) >= len(out.Devices) {
				return nil, node.PodDevices{}, fmt.Errorf("%s: container %q: device index %d, but the request has %d devices", what, name, i, len(out.Devices))
			}
			devs = append(devs, out.Devices[i])
		}
		out.Containers[name] = devs
	}
	return pod, out, nil
}

// sameDevice: a and b are the one device of one claim's request.
func sameDevice(a, b node.AllocatedDevice) bool {
	return a.Claim == b.Claim && a.Request == b.Request && a.ID() == b.ID()
}
