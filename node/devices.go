package node

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/vkubelet/virtual-kubelet/node/podspec"
)

// DeviceProvider is an optional extension of PodLifecycleHandler: a
// provider whose node has devices takes part in Dynamic Resource
// Allocation (resource.k8s.io/v1) as a kubelet with DRA drivers does. Its
// devices are published as ResourceSlices of the node (spec.nodeName), so
// the scheduler allocates them to ResourceClaims; before CreatePod the
// controller checks that each of the pod's claims is allocated on the node
// and reserved for the pod, and hands the provider the devices (see
// PrepareDevices).
type DeviceProvider interface {
	// NotifyDevices registers f, which the provider calls with all its
	// devices, once when it is registered and again whenever they change
	// (devices added, removed, attributes or capacity changed). f does not
	// block; NotifyDevices does not either.
	NotifyDevices(ctx context.Context, f func([]DeviceDriver))

	// PrepareDevices hands over the devices allocated to the pod's claims
	// before CreatePod, as a kubelet's DRA drivers prepare them before the
	// pod's sandbox: the provider makes them visible to the containers
	// devices.Containers names. It is called with every pod that has
	// claims, each time the pod is to be created. An errdefs.InvalidInput
	// error (a device the provider cannot prepare) fails the pod with
	// reason ReasonFailedPrepareDevices; any other error is retried.
	PrepareDevices(ctx context.Context, pod *corev1.Pod, devices PodDevices) error
}

// DeviceDriver is the devices of one DRA driver, published as that
// driver's ResourceSlices for the node.
type DeviceDriver struct {
	// Name is the driver's name, a DNS subdomain (gpu.example.com): what
	// DeviceClasses select on (device.driver).
	Name string
	// Pools are its pools of devices, each published in one ResourceSlice.
	Pools []DevicePool
}

// DevicePool is a pool of a driver's devices.
type DevicePool struct {
	// Name is the pool's name, unique within the driver (e.g. the node's
	// name).
	Name string
	// Devices are the pool's devices with their attributes and capacity,
	// as the ResourceSlice lists them; their names are unique in the pool.
	Devices []resourcev1.Device
}

// ValidateDevices reports the first of drivers' names that repeats: a
// driver, a pool of one driver, a device of one pool. Each has to be one
// of a kind for a claim's allocation to name it.
func ValidateDevices(drivers []DeviceDriver) error {
	seenDrivers := map[string]bool{}
	for _, d := range drivers {
		if d.Name == "" {
			return fmt.Errorf("a device driver has no name")
		}
		if seenDrivers[d.Name] {
			return fmt.Errorf("device driver %q declared twice", d.Name)
		}
		seenDrivers[d.Name] = true
		seenPools := map[string]bool{}
		for _, p := range d.Pools {
			if p.Name == "" {
				return fmt.Errorf("driver %q: a pool has no name", d.Name)
			}
			if seenPools[p.Name] {
				return fmt.Errorf("driver %q: pool %q declared twice", d.Name, p.Name)
			}
			seenPools[p.Name] = true
			seenDevices := map[string]bool{}
			for _, dev := range p.Devices {
				if dev.Name == "" {
					return fmt.Errorf("driver %q, pool %q: a device has no name", d.Name, p.Name)
				}
				if seenDevices[dev.Name] {
					return fmt.Errorf("driver %q, pool %q: device %q declared twice", d.Name, p.Name, dev.Name)
				}
				seenDevices[dev.Name] = true
			}
		}
	}
	return nil
}

// AllocatedDevice is one device allocated to one of a pod's claims.
type AllocatedDevice struct {
	// Claim is the pod's name for the claim (spec.resourceClaims[].name);
	// ClaimName is the ResourceClaim's.
	Claim, ClaimName string
	// Request is the claim's request the device was allocated for ("gpu",
	// or "gpu/h200" for a subrequest of firstAvailable).
	Request string
	// Driver, Pool and Device name the device, as its ResourceSlice does.
	Driver, Pool, Device string
	// Config is the opaque configuration that applies to the device, the
	// class's first and then the claim's, as the allocation lists them.
	Config []resourcev1.DeviceAllocationConfiguration
}

// ID is the device's resource ID in allocatedResourcesStatus, as the
// kubelet writes it: driver/pool/device.
func (d AllocatedDevice) ID() corev1.ResourceID {
	return corev1.ResourceID(d.Driver + "/" + d.Pool + "/" + d.Device)
}

// PodDevices is what Dynamic Resource Allocation gave a pod.
type PodDevices struct {
	// Devices are all the devices allocated to the pod's claims.
	Devices []AllocatedDevice
	// Containers are, by container name (init containers included), the
	// devices of the claims (or the claims' requests) the container's
	// resources.claims name. A container that names none has none.
	Containers map[string][]AllocatedDevice
}

// podDevicesOf is what claims (the pod's claim name to its ResourceClaim,
// allocated) give pod's containers.
func podDevicesOf(pod *corev1.Pod, claims map[string]*resourcev1.ResourceClaim) PodDevices {
	out := PodDevices{Containers: map[string][]AllocatedDevice{}}
	byClaim := map[string][]AllocatedDevice{}
	for _, pc := range pod.Spec.ResourceClaims {
		claim := claims[pc.Name]
		if claim == nil || claim.Status.Allocation == nil {
			continue
		}
		alloc := claim.Status.Allocation.Devices
		for _, r := range alloc.Results {
			d := AllocatedDevice{
				Claim: pc.Name, ClaimName: claim.Name, Request: r.Request,
				Driver: r.Driver, Pool: r.Pool, Device: r.Device,
				Config: resourceclaim.ConfigForResult(alloc.Config, r),
			}
			byClaim[pc.Name] = append(byClaim[pc.Name], d)
			out.Devices = append(out.Devices, d)
		}
	}
	for _, c := range podspec.AllContainers(pod) {
		for _, ref := range c.Resources.Claims {
			for _, d := range byClaim[ref.Name] {
				if ref.Request == "" || resourceclaim.BaseRequestRef(d.Request) == resourceclaim.BaseRequestRef(ref.Request) {
					out.Containers[c.Name] = append(out.Containers[c.Name], d)
				}
			}
		}
	}
	return out
}

// ResourcesStatus is a container's allocatedResourcesStatus as the kubelet
// writes it: one entry per claim (claim:<name>) or claim request
// (claim:<name>/<request>) the container's resources.claims name, listing
// each of its devices (by AllocatedDevice.ID) with the health health
// gives it. A provider that knows its devices' health reports it this way
// in its containers' statuses.
func (d PodDevices) ResourcesStatus(c corev1.Container, health func(AllocatedDevice) corev1.ResourceHealthStatus) []corev1.ResourceStatus {
	var out []corev1.ResourceStatus
	for _, ref := range c.Resources.Claims {
		name := "claim:" + ref.Name
		if ref.Request != "" {
			name += "/" + ref.Request
		}
		st := corev1.ResourceStatus{Name: corev1.ResourceName(name)}
		seen := map[corev1.ResourceID]bool{}
		for _, dev := range d.Containers[c.Name] {
			if dev.Claim != ref.Name || (ref.Request != "" && resourceclaim.BaseRequestRef(dev.Request) != resourceclaim.BaseRequestRef(ref.Request)) || seen[dev.ID()] {
				continue
			}
			seen[dev.ID()] = true
			st.Resources = append(st.Resources, corev1.ResourceHealth{ResourceID: dev.ID(), Health: health(dev)})
		}
		if len(st.Resources) > 0 {
			out = append(out, st)
		}
	}
	return out
}
