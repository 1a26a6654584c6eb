package mock

import (
	"context"
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// DeviceDriver is the DRA driver of the mock's devices; its DeviceClass
// selects device.driver == DeviceDriver (hack/deploy ships one).
const DeviceDriver = "gpu.mock.vkubelet.io"

// What a container with devices sees of them, as a GPU runtime shows its
// devices: VisibleDevicesEnv lists their indices ("0,3"), and
// DevicesFile has a line "<index> <device name>" for each.
const (
	VisibleDevicesEnv = "VISIBLE_DEVICES"
	DevicesFile       = "/run/devices/" + DeviceDriver
)

// Pod annotations that script the pod's devices.
const (
	// AnnotationUnhealthyDevices names devices ("gpu-3,gpu-5", or "*" for
	// all) the pod's containers report Unhealthy in allocatedResourcesStatus;
	// its other devices are Healthy. It may change while the pod runs.
	AnnotationUnhealthyDevices = "mock.vkubelet.io/unhealthy-devices"
	// AnnotationFailPrepareDevices makes the pod's devices fail to be
	// prepared, with the value as the message: the pod fails.
	AnnotationFailPrepareDevices = "mock.vkubelet.io/fail-prepare-devices"
)

// deviceSet is the node's devices, from the config's "devices".
type deviceSet struct {
	devices []resourcev1.Device
	// index is each device's position in the config, what
	// VisibleDevicesEnv lists.
	index map[string]int
}

// deviceEntry is one element of the config's "devices" list: a device,
// or with count that many named name-0, name-1, ...
type deviceEntry struct {
	Name       string                     `json:"name"`
	Count      int                        `json:"count"`
	Attributes map[string]json.RawMessage `json:"attributes"`
	Capacity   map[string]string          `json:"capacity"`
}

// parseDevices reads the config's "devices": a list of
//
//	{"name": "gpu", "count": 8, "attributes": {"model": "h100", "memory": "80Gi"}, "capacity": {"memory": "80Gi"}}
//
// attributes being strings, integers or booleans. Every device gets the
// integer attribute index too. A device named twice is an error.
func parseDevices(value json.RawMessage) (*deviceSet, error) {
	var entries []deviceEntry
	dec := json.NewDecoder(strings.NewReader(string(value)))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&entries); err != nil {
		return nil, fmt.Errorf(`must be a list of {"name", "count", "attributes", "capacity"}: %v`, err)
	}
	set := &deviceSet{index: map[string]int{}}
	for _, e := range entries {
		names := []string{e.Name}
		if e.Count < 0 || e.Count > resourcev1.ResourceSliceMaxDevices {
			return nil, fmt.Errorf("device %q: count must be between 0 and %d, got %d", e.Name, resourcev1.ResourceSliceMaxDevices, e.Count)
		}
		if e.Count > 0 {
			names = names[:0]
			for i := range e.Count {
				names = append(names, e.Name+"-"+strconv.Itoa(i))
			}
		}
		attrs, err := deviceAttributes(e.Attributes)
		if err != nil {
			return nil, fmt.Errorf("device %q: %v", e.Name, err)
		}
		capacity := map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{}
		for k, v := range e.Capacity {
			q, err := resource.ParseQuantity(v)
			if err != nil {
				return nil, fmt.Errorf("device %q: capacity %s: invalid quantity %q", e.Name, k, v)
			}
			capacity[resourcev1.QualifiedName(k)] = resourcev1.DeviceCapacity{Value: q}
		}
		for _, name := range names {
			if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
				return nil, fmt.Errorf("device name %q: %s", name, strings.Join(errs, "; "))
			}
			if _, dup := set.index[name]; dup {
				return nil, fmt.Errorf("device %q declared twice", name)
			}
			i := len(set.devices)
			set.index[name] = i
			a := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"index": {IntValue: ptr.To(int64(i))}}
			for k, v := range attrs {
				a[k] = v
			}
			d := resourcev1.Device{Name: name, Attributes: a}
			if len(capacity) > 0 {
				d.Capacity = capacity
			}
			set.devices = append(set.devices, d)
		}
	}
	if len(set.devices) > resourcev1.ResourceSliceMaxDevices {
		return nil, fmt.Errorf("%d devices, more than the %d a node's pool holds", len(set.devices), resourcev1.ResourceSliceMaxDevices)
	}
	return set, nil
}

// deviceAttributes reads attributes: strings, integers and booleans.
func deviceAttributes(raw map[string]json.RawMessage) (map[resourcev1.QualifiedName]resourcev1.DeviceAttribute, error) {
	out := map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{}
	for k, v := range raw {
		if errs := validation.IsCIdentifier(k); len(errs) > 0 || len(k) > resourcev1.DeviceMaxIDLength {
			return nil, fmt.Errorf("attribute %q: must be a C identifier of at most %d characters", k, resourcev1.DeviceMaxIDLength)
		}
		if k == "index" {
			return nil, fmt.Errorf("attribute index: the mock sets it (the device's position)")
		}
		var s string
		var b bool
		var f float64
		switch {
		case json.Unmarshal(v, &s) == nil:
			out[resourcev1.QualifiedName(k)] = resourcev1.DeviceAttribute{StringValue: &s}
		case json.Unmarshal(v, &b) == nil:
			out[resourcev1.QualifiedName(k)] = resourcev1.DeviceAttribute{BoolValue: &b}
		case json.Unmarshal(v, &f) == nil && f == math.Trunc(f) && math.Abs(f) < 1<<53:
			out[resourcev1.QualifiedName(k)] = resourcev1.DeviceAttribute{IntValue: ptr.To(int64(f))}
		default:
			return nil, fmt.Errorf("attribute %s: must be a string, an integer or a boolean, got %s", k, v)
		}
	}
	return out, nil
}

// withDevices is the mock of a node whose config declares devices: the
// mock as a node.DeviceProvider.
type withDevices struct{ *Provider }

var _ node.DeviceProvider = withDevices{}

// NotifyDevices implements node.DeviceProvider: the configured devices,
// in one pool named after the node; they do not change.
func (p withDevices) NotifyDevices(_ context.Context, f func([]node.DeviceDriver)) {
	f([]node.DeviceDriver{{Name: DeviceDriver, Pools: []node.DevicePool{{Name: p.nodeName, Devices: p.devices.devices}}}})
}

// PrepareDevices implements node.DeviceProvider: the pod's containers
// will see their devices. A device that is not one of the node's is
// refused, as is every device of a pod with AnnotationFailPrepareDevices.
func (p withDevices) PrepareDevices(_ context.Context, pod *corev1.Pod, devices node.PodDevices) error {
	if msg, ok := pod.Annotations[AnnotationFailPrepareDevices]; ok {
		return errdefs.InvalidInputf("%s", msg)
	}
	for _, d := range devices.Devices {
		if _, ok := p.devices.index[d.Device]; !ok || d.Driver != DeviceDriver || d.Pool != p.nodeName {
			return errdefs.InvalidInputf("device %s is not one of node %s's", d.ID(), p.nodeName)
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	put(&p.prepared, podKey(pod.Namespace, pod.Name), preparedDevices{uid: pod.UID, devices: devices})
	return nil
}

// preparedDevices are a pod's devices, from PrepareDevices to CreatePod.
type preparedDevices struct {
	uid     types.UID
	devices node.PodDevices
}

// takePrepared moves the devices prepared for pod into its state; p.mu
// must be held.
func (p *Provider) takePrepared(ps *podState) {
	key := podKey(ps.pod.namespace, ps.pod.name)
	if d, ok := p.prepared[key]; ok {
		delete(p.prepared, key)
		if d.uid == ps.pod.uid {
			ps.devices = &d.devices
		}
	}
}

// containerDevices is what container c sees of its devices: the
// VisibleDevicesEnv value and DevicesFile; empty without devices.
func (ps *podState) containerDevices(c string) (visible, file string) {
	if ps.devices == nil {
		return "", ""
	}
	var idx []int
	names := map[int]string{}
	for _, d := range ps.devices.Containers[c] {
		i := ps.p.devices.index[d.Device]
		if _, seen := names[i]; !seen {
			idx = append(idx, i)
			names[i] = d.Device
		}
	}
	slices.Sort(idx)
	var v []string
	var f strings.Builder
	for _, i := range idx {
		v = append(v, strconv.Itoa(i))
		fmt.Fprintf(&f, "%d %s\n", i, names[i])
	}
	return strings.Join(v, ","), f.String()
}

// deviceHealth sets the containers' allocatedResourcesStatus in status:
// Unhealthy for the devices AnnotationUnhealthyDevices names.
func (ps *podState) deviceHealth(status *corev1.PodStatus) {
	if ps.devices == nil {
		return
	}
	unhealthy := map[string]bool{}
	for _, n := range strings.Split(ps.pod.annotations[AnnotationUnhealthyDevices], ",") {
		unhealthy[strings.TrimSpace(n)] = true
	}
	health := func(d node.AllocatedDevice) corev1.ResourceHealthStatus {
		if unhealthy["*"] || unhealthy[d.Device] {
			return corev1.ResourceHealthStatusUnhealthy
		}
		return corev1.ResourceHealthStatusHealthy
	}
	for _, list := range []struct {
		states   []*containerState
		statuses []corev1.ContainerStatus
	}{{ps.init, status.InitContainerStatuses}, {ps.containers, status.ContainerStatuses}} {
		for i, c := range list.states {
			list.statuses[i].AllocatedResourcesStatus = ps.devices.ResourcesStatus(c.spec.container(), health)
		}
	}
}
