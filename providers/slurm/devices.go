package slurm

import (
	"context"
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

// The node's GRES are its devices in Dynamic Resource Allocation: each
// unit of a GRES the config's devices name (gpu by default) is a device of
// the DRA driver DeviceDriverSuffix appended to the GRES name
// (gpu.slurm.vkubelet.io), in a pool named after the virtual node and its
// Slurm node (vk-slurm/c1: pools are the driver's across the cluster, and
// two virtual nodes may front Slurm nodes of one name), with the
// attributes type (the GRES type, "a100"), index (its position among the
// node's units of that GRES, as Slurm numbers them in IDX and
// SLURM_JOB_GPUS) and node. A pod whose claims hold such devices runs as
// a job on that Slurm node with --gres=NAME:TYPE:COUNT, and each of its
// containers sees, in CUDA_VISIBLE_DEVICES and the like, the GPUs Slurm
// gave the job for its devices (see package internal/sandbox).

// DeviceDriverSuffix follows the GRES name in the name of the DRA driver
// its devices are published as: gpu.slurm.vkubelet.io.
const DeviceDriverSuffix = ".slurm.vkubelet.io"

// GPUDriver is the DRA driver of the GRES gpu; hack/deploy/devices ships
// its DeviceClass.
const GPUDriver = "gpu" + DeviceDriverSuffix

// DefaultDeviceGres are the GRES published as devices when the config
// does not say.
var DefaultDeviceGres = []string{"gpu"}

// DefaultGPUFiles are the device files of NVIDIA's GPUs, which a
// container with GPUs gets when the config does not say.
var DefaultGPUFiles = []string{"/dev/nvidia" + sandbox.GPUIndexPlaceholder, "/dev/nvidiactl", "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"}

// validateDevices checks the config's devices (GRES names, each once)
// and GPU files (absolute paths).
func (c *Config) validateDevices() error {
	if c.GPUFiles == nil {
		c.GPUFiles = DefaultGPUFiles
	}
	for i, f := range c.GPUFiles {
		if !filepath.IsAbs(f) || filepath.Clean(f) != f || f == "/" {
			return fmt.Errorf("gpuFiles[%d]: must be a clean absolute path of a device file, got %q", i, f)
		}
	}
	if c.Devices == nil {
		c.Devices = DefaultDeviceGres
	}
	seen := map[string]bool{}
	for i, name := range c.Devices {
		if errs := validation.IsDNS1123Label(name); len(errs) > 0 {
			return fmt.Errorf("devices[%d]: %q is not a GRES name that can name a DRA driver (%s)", i, name, strings.Join(errs, "; "))
		}
		if seen[name] {
			return fmt.Errorf("devices: GRES %q declared twice", name)
		}
		seen[name] = true
	}
	return nil
}

// gresUnit is one GRES entry of a node (gpu:a100:4): count units of the
// named GRES and type.
type gresUnit struct {
	name, typ string
	count     int64
}

// maxGresCount bounds a GRES count read from sinfo: shares (mps:400) and
// amounts (bandwidth:4G) are counts too.
const maxGresCount = 1 << 50

// parseGres reads a node's GRES as sinfo --json gives them: entries
// "name[:type]:count[(S:sockets)]" separated by commas, "" or "(null)" for
// none; a count may end in K, M, G, T or P (powers of 1024).
func parseGres(s string) ([]gresUnit, error) {
	s = strings.TrimSpace(s)
	if s == "" || s == "(null)" {
		return nil, nil
	}
	var out []gresUnit
	for _, entry := range splitGres(s) {
		spec := entry
		if i := strings.IndexByte(spec, '('); i >= 0 {
			if !strings.HasSuffix(spec, ")") {
				return nil, fmt.Errorf("GRES %q: unbalanced parenthesis", entry)
			}
			spec = spec[:i]
		}
		parts := strings.Split(spec, ":")
		if len(parts) < 2 || len(parts) > 3 {
			return nil, fmt.Errorf("GRES %q: want name[:type]:count", entry)
		}
		u := gresUnit{name: parts[0]}
		if len(parts) == 3 {
			u.typ = parts[1]
		}
		n, ok := gresCount(parts[len(parts)-1])
		if !ok {
			return nil, fmt.Errorf("GRES %q: count must be a whole number, with K, M, G, T or P, of at most 2^50", entry)
		}
		u.count = n
		if u.name == "" {
			return nil, fmt.Errorf("GRES %q: no name", entry)
		}
		out = append(out, u)
	}
	return out, nil
}

// gresCount reads a GRES count: digits, then perhaps a binary suffix.
func gresCount(s string) (int64, bool) {
	mult := int64(1)
	if n := len(s); n > 0 {
		if i := strings.IndexByte("KMGTP", s[n-1]); i >= 0 {
			mult, s = int64(1)<<(10*(i+1)), s[:n-1]
		}
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 || n > maxGresCount/mult || (s != "" && s[0] == '+') {
		return 0, false
	}
	return n * mult, true
}

// splitGres splits a GRES list at the commas outside parentheses: the
// socket list (S:0-1,3) has commas of its own.
func splitGres(s string) []string {
	var out []string
	depth, start := 0, 0
	for i, r := range s {
		switch r {
		case '(':
			depth++
		case ')':
			depth--
		case ',':
			if depth == 0 {
				out = append(out, s[start:i])
				start = i + 1
			}
		}
	}
	return append(out, s[start:])
}

// slurmDevice is a device published for a unit of a node's GRES.
type slurmDevice struct {
	gres, typ string
	index     int
	// node is the Slurm node that has it.
	node string
}

// nodeDevices are the devices of the Slurm nodes, and the pods' devices
// between PrepareDevices and CreatePod.
type nodeDevices struct {
	drivers []node.DeviceDriver
	// byID is every published device by driver/pool/device.
	byID map[corev1.ResourceID]slurmDevice

	mu       sync.Mutex
	prepared map[string]preparedDevices // by namespace/name
}

// preparedDevices are a pod's devices, from PrepareDevices to CreatePod.
type preparedDevices struct {
	uid     types.UID
	devices node.PodDevices
}

// devicesOf are the devices the GRES names in published give the Slurm
// nodes of the virtual node named virtual: one driver per GRES name, one
// pool per Slurm node that has any.
func devicesOf(virtual string, nodes []slurmNode, published []string) (*nodeDevices, error) {
	d := &nodeDevices{byID: map[corev1.ResourceID]slurmDevice{}, prepared: map[string]preparedDevices{}}
	pools := map[string][]node.DevicePool{}
	for _, n := range nodes {
		units, err := parseGres(n.Gres)
		if err != nil {
			return nil, fmt.Errorf("sinfo --json: node %q: %v", n.Name, err)
		}
		pool := virtual + "/" + n.Name
		perGres := map[string][]resourcev1.Device{}
		for _, u := range units {
			if !slices.Contains(published, u.name) {
				continue
			}
			if int64(len(perGres[u.name]))+u.count > resourcev1.ResourceSliceMaxDevices {
				return nil, fmt.Errorf("sinfo --json: node %q: more units of GRES %s than the %d devices a pool holds", n.Name, u.name, resourcev1.ResourceSliceMaxDevices)
			}
			for range u.count {
				index := len(perGres[u.name])
				dev := resourcev1.Device{
					Name: u.name + "-" + strconv.Itoa(index),
					Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
						"index": {IntValue: ptr.To(int64(index))},
						"node":  {StringValue: ptr.To(n.Name)},
					},
				}
				if u.typ != "" {
					dev.Attributes["type"] = resourcev1.DeviceAttribute{StringValue: ptr.To(u.typ)}
				}
				perGres[u.name] = append(perGres[u.name], dev)
				id := corev1.ResourceID(u.name + DeviceDriverSuffix + "/" + pool + "/" + dev.Name)
				d.byID[id] = slurmDevice{gres: u.name, typ: u.typ, index: index, node: n.Name}
			}
		}
		for name, devs := range perGres {
			if errs := validation.IsDNS1123Subdomain(n.Name); len(errs) > 0 || len(pool) > resourcev1.PoolNameMaxLength {
				return nil, fmt.Errorf("sinfo --json: node %q has GRES %s but its name cannot name a device pool %q", n.Name, name, pool)
			}
			pools[name] = append(pools[name], node.DevicePool{Name: pool, Devices: devs})
		}
	}
	for _, name := range published {
		if len(pools[name]) > 0 {
			d.drivers = append(d.drivers, node.DeviceDriver{Name: name + DeviceDriverSuffix, Pools: pools[name]})
		}
	}
	if err := node.ValidateDevices(d.drivers); err != nil {
		return nil, fmt.Errorf("sinfo --json: %v", err)
	}
	return d, nil
}

// withDevices is the provider of a node whose Slurm nodes have GRES
// published as devices: the provider as a node.DeviceProvider.
type withDevices struct{ *Provider }

var _ node.DeviceProvider = withDevices{}

// NotifyDevices implements node.DeviceProvider: the GRES sinfo listed
// when the provider started.
func (p withDevices) NotifyDevices(_ context.Context, f func([]node.DeviceDriver)) {
	f(p.devices.drivers)
}

// PrepareDevices implements node.DeviceProvider: the pod's job will ask
// Slurm for its devices. A device that is not one of the node's, or
// devices on two Slurm nodes (a job runs on one), are refused.
func (p withDevices) PrepareDevices(_ context.Context, pod *corev1.Pod, devices node.PodDevices) error {
	on := ""
	for _, d := range devices.Devices {
		sd, ok := p.devices.byID[d.ID()]
		if !ok {
			return errdefs.InvalidInputf("device %s is not a GRES of this node's Slurm nodes", d.ID())
		}
		if on != "" && sd.node != on {
			return errdefs.InvalidInputf("devices on Slurm nodes %s and %s: a pod's job runs on one node", on, sd.node)
		}
		on = sd.node
	}
	p.devices.mu.Lock()
	defer p.devices.mu.Unlock()
	p.devices.prepared[podKey(pod.Namespace, pod.Name)] = preparedDevices{uid: pod.UID, devices: devices}
	return nil
}

// podDevices are the devices prepared for pod; nil when it has none (or
// the node publishes none).
func (p *Provider) podDevices(pod *corev1.Pod) *node.PodDevices {
	if p.devices == nil {
		return nil
	}
	p.devices.mu.Lock()
	defer p.devices.mu.Unlock()
	d, ok := p.devices.prepared[podKey(pod.Namespace, pod.Name)]
	if !ok || d.uid != pod.UID || len(d.devices.Devices) == 0 {
		return nil
	}
	return &d.devices
}

// forgetDevices drops what was prepared for the pod once its job is
// submitted or it is gone.
func (p *Provider) forgetDevices(pod *corev1.Pod) {
	if p.devices == nil {
		return
	}
	p.devices.mu.Lock()
	defer p.devices.mu.Unlock()
	if d, ok := p.devices.prepared[podKey(pod.Namespace, pod.Name)]; ok && d.uid == pod.UID {
		delete(p.devices.prepared, podKey(pod.Namespace, pod.Name))
	}
}

// deviceArgs are the job's options for the pod's devices: the GRES specs
// (gpu:a100:2) to join the others in --gres, and --nodelist for the Slurm
// node whose devices they are.
func (p *Provider) deviceArgs(pod *corev1.Pod) (gres []string, nodelist string) {
	devs := p.podDevices(pod)
	if devs == nil {
		return nil, ""
	}
	counts := map[string]int{}
	seen := map[corev1.ResourceID]bool{}
	for _, d := range devs.Devices {
		if seen[d.ID()] {
			continue
		}
		seen[d.ID()] = true
		sd := p.devices.byID[d.ID()]
		spec := sd.gres
		if sd.typ != "" {
			spec += ":" + sd.typ
		}
		counts[spec]++
		nodelist = sd.node
	}
	for _, spec := range sortedKeys(counts) {
		gres = append(gres, spec+":"+strconv.Itoa(counts[spec]))
	}
	return gres, nodelist
}

// gpuPlan is what the job needs to give each container its GPUs: the
// indexes of all the pod's GPU devices, and of each container's (init
// containers included), comma-separated and ascending. The job maps them
// onto the GPUs Slurm gave it, rank for rank (see package
// internal/sandbox).
func (p *Provider) gpuPlan(pod *corev1.Pod) (all string, containers map[string]string) {
	devs := p.podDevices(pod)
	if devs == nil {
		return "", nil
	}
	indexes := func(list []node.AllocatedDevice) string {
		var idx []int
		for _, d := range list {
			sd, ok := p.devices.byID[d.ID()]
			if ok && sd.gres == "gpu" && !slices.Contains(idx, sd.index) {
				idx = append(idx, sd.index)
			}
		}
		slices.Sort(idx)
		s := make([]string, len(idx))
		for i, n := range idx {
			s[i] = strconv.Itoa(n)
		}
		return strings.Join(s, ",")
	}
	containers = map[string]string{}
	for name, list := range devs.Containers {
		containers[name] = indexes(list)
	}
	return indexes(devs.Devices), containers
}

// discoverDevices reads the Slurm nodes' GRES from sinfo; nil when none of
// them is one the config publishes.
func (p *Provider) discoverDevices(ctx context.Context) (*nodeDevices, error) {
	nodes, err := p.cli.sinfo(ctx)
	if err != nil {
		return nil, err
	}
	d, err := devicesOf(p.nodeName, nodes, p.cfg.Devices)
	if err != nil || len(d.drivers) == 0 {
		return nil, err
	}
	return d, nil
}
