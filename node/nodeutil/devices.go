package nodeutil

import (
	"context"
	"sync"

	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/dynamic-resource-allocation/resourceslice"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// DevicePublisher keeps a DeviceProvider's devices published as the
// ResourceSlices of its node, as a kubelet's DRA drivers do: one
// resourceslice.Controller (k8s.io/dynamic-resource-allocation) per driver,
// its slices' spec.nodeName the node and owned by the Node, so they go
// when the Node goes. A driver the provider no longer declares has its
// slices removed. Node.Run runs one for a provider with devices.
type DevicePublisher struct {
	client   kubernetes.Interface
	nodeName string
	devices  node.DeviceProvider

	mu     sync.Mutex
	latest []node.DeviceDriver
	fresh  chan struct{}
}

// NewDevicePublisher returns the publisher of devices' devices for the
// node named nodeName; Run publishes them.
func NewDevicePublisher(client kubernetes.Interface, nodeName string, devices node.DeviceProvider) *DevicePublisher {
	return &DevicePublisher{client: client, nodeName: nodeName, devices: devices, fresh: make(chan struct{}, 1)}
}

// Run publishes the devices, and each new set the provider reports, until
// ctx ends. Slices stay when it returns: they describe the node's devices
// as long as the Node is registered.
func (p *DevicePublisher) Run(ctx context.Context) {
	p.devices.NotifyDevices(ctx, p.notified)
	controllers := map[string]*resourceslice.Controller{}
	defer func() {
		for _, c := range controllers {
			c.Stop()
		}
	}()
	for {
		select {
		case <-ctx.Done():
			return
		case <-p.fresh:
		}
		p.mu.Lock()
		drivers := p.latest
		p.mu.Unlock()
		if err := node.ValidateDevices(drivers); err != nil {
			log.G(ctx).WithError(err).Error("the provider's devices are not published")
			continue
		}
		declared := map[string]bool{}
		for _, d := range drivers {
			declared[d.Name] = true
			resources := driverResources(d)
			if c := controllers[d.Name]; c != nil {
				c.Update(resources)
				continue
			}
			c, err := resourceslice.StartController(ctx, resourceslice.Options{
				DriverName: d.Name,
				KubeClient: p.client,
				Owner:      &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: p.nodeName},
				Resources:  resources,
				ErrorHandler: func(ctx context.Context, err error, msg string) {
					log.G(ctx).WithError(err).WithField("driver", d.Name).Warn("publishing ResourceSlices: " + msg)
				},
			})
			if err != nil {
				log.G(ctx).WithError(err).WithField("driver", d.Name).Error("publishing ResourceSlices")
				continue
			}
			controllers[d.Name] = c
		}
		for name, c := range controllers {
			if !declared[name] {
				c.Update(&resourceslice.DriverResources{}) // its slices are removed
			}
		}
	}
}

// notified keeps the provider's newest devices for Run; it does not block.
func (p *DevicePublisher) notified(drivers []node.DeviceDriver) {
	p.mu.Lock()
	p.latest = drivers
	p.mu.Unlock()
	select {
	case p.fresh <- struct{}{}:
	default:
	}
}

// driverResources is d as the slice controller publishes it: each pool in
// slices of at most ResourceSliceMaxDevices devices.
func driverResources(d node.DeviceDriver) *resourceslice.DriverResources {
	out := &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{}}
	for _, pool := range d.Pools {
		var p resourceslice.Pool
		devices := pool.Devices
		for len(devices) > resourcev1.ResourceSliceMaxDevices {
			p.Slices = append(p.Slices, resourceslice.Slice{Devices: devices[:resourcev1.ResourceSliceMaxDevices]})
			devices = devices[resourcev1.ResourceSliceMaxDevices:]
		}
		p.Slices = append(p.Slices, resourceslice.Slice{Devices: devices})
		out.Pools[pool.Name] = p
	}
	return out
}
