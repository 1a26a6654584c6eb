package mock

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/provider"
)

func TestParseDevices(t *testing.T) {
	set, err := parseDevices(json.RawMessage(`[
		{"name": "gpu", "count": 2, "attributes": {"model": "h100", "mig": false, "cores": 132}, "capacity": {"memory": "80Gi"}},
		{"name": "spare"}]`))
	if err != nil {
		t.Fatal(err)
	}
	if len(set.devices) != 3 || set.index["spare"] != 2 || set.devices[1].Name != "gpu-1" {
		t.Fatalf("devices %+v, index %v", set.devices, set.index)
	}
	a := set.devices[1].Attributes
	if *a["model"].StringValue != "h100" || *a["mig"].BoolValue || *a["cores"].IntValue != 132 || *a["index"].IntValue != 1 {
		t.Errorf("gpu-1 attributes %+v", a)
	}
	if q := set.devices[0].Capacity["memory"].Value; q.String() != "80Gi" {
		t.Errorf("gpu-0 memory capacity %s", q.String())
	}
	for config, want := range map[string]string{
		`[{"name": "gpu", "count": 2}, {"name": "gpu-1"}]`:          `device "gpu-1" declared twice`,
		`[{"name": "gpu"}, {"name": "gpu"}]`:                        `device "gpu" declared twice`,
		`[{"name": "GPU"}]`:                                         `device name "GPU"`,
		`[{"name": "gpu", "attributes": {"model": [1]}}]`:           `attribute model: must be a string, an integer or a boolean`,
		`[{"name": "gpu", "attributes": {"index": 3}}]`:             `attribute index: the mock sets it`,
		`[{"name": "gpu", "attributes": {"a-b": 3}}]`:               `attribute "a-b": must be a C identifier`,
		`[{"name": "gpu", "capacity": {"memory": "lots"}}]`:         `capacity memory: invalid quantity "lots"`,
		`[{"name": "gpu", "count": 129}]`:                           `count must be between 0 and 128`,
		`[{"name": "gpu", "colour": "red"}]`:                        `unknown field "colour"`,
		`{"name": "gpu"}`:                                           `must be a list`,
		`[{"name": "gpu", "attributes": {"cores": 1.5}}]`:           `attribute cores: must be a string, an integer or a boolean`,
		`[{"name": "a", "count": 100}, {"name": "b", "count": 29}]`: `129 devices, more than the 128`,
	} {
		if _, err := parseDevices(json.RawMessage(config)); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("parseDevices(%s) = %v, want an error containing %q", config, err, want)
		}
	}
}

// TestDevicesSeenAndHealth: a mock with devices is a DeviceProvider; a
// pod's prepared devices are its containers' VISIBLE_DEVICES and devices
// file, and their health follows AnnotationUnhealthyDevices; a device not
// the node's, or AnnotationFailPrepareDevices, is refused as invalid.
func TestDevicesSeenAndHealth(t *testing.T) {
	cfg := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(cfg, []byte(`{"vk0": {"devices": [{"name": "gpu", "count": 4}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	np, err := New(context.Background(), provider.InitConfig{NodeName: "vk0", ConfigPath: cfg})
	if err != nil {
		t.Fatal(err)
	}
	caps := node.CapabilitiesOf(np)
	if caps.Devices == nil {
		t.Fatal("a mock with devices is not a DeviceProvider")
	}
	if plain, _ := New(context.Background(), provider.InitConfig{NodeName: "vk0"}); node.CapabilitiesOf(plain).Devices != nil {
		t.Fatal("a mock without devices is a DeviceProvider")
	}
	var published []node.DeviceDriver
	caps.Devices.NotifyDevices(context.Background(), func(d []node.DeviceDriver) { published = d })
	if len(published) != 1 || published[0].Name != DeviceDriver || published[0].Pools[0].Name != "vk0" || len(published[0].Pools[0].Devices) != 4 {
		t.Fatalf("published %+v", published)
	}

	p := np.(withDevices).Provider
	r := &recorder{}
	p.NotifyPods(context.Background(), r.record)
	pod := testPod("web", nil, corev1.RestartPolicyAlways)
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	dev := func(name string) node.AllocatedDevice {
		return node.AllocatedDevice{Claim: "gpu", Request: "gpu", Driver: DeviceDriver, Pool: "vk0", Device: name}
	}
	devices := node.PodDevices{Devices: []node.AllocatedDevice{dev("gpu-3"), dev("gpu-0")}}
	devices.Containers = map[string][]node.AllocatedDevice{"app": devices.Devices}
	ctx := context.Background()
	if err := caps.Devices.PrepareDevices(ctx, pod, devices); err != nil {
		t.Fatal(err)
	}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	out := func(cmd ...string) string {
		io := &fakeIO{stdout: &closeBuffer{}, stderr: &closeBuffer{}}
		if err := p.RunInContainer(ctx, "ns", "web", "app", cmd, io); err != nil {
			t.Fatalf("%v: %v", cmd, err)
		}
		return io.stdout.String()
	}
	if got := out("printenv", VisibleDevicesEnv); got != "0,3\n" {
		t.Errorf("%s = %q, want 0,3", VisibleDevicesEnv, got)
	}
	if got := out("cat", DevicesFile); got != "0 gpu-0\n3 gpu-3\n" {
		t.Errorf("%s = %q", DevicesFile, got)
	}

	health := func(p *corev1.Pod) map[string]corev1.ResourceHealthStatus {
		out := map[string]corev1.ResourceHealthStatus{}
		for _, rs := range p.Status.ContainerStatuses[0].AllocatedResourcesStatus {
			for _, h := range rs.Resources {
				out[string(rs.Name)+" "+string(h.ResourceID)] = h.Health
			}
		}
		return out
	}
	if got := health(r.last()); got["claim:gpu "+DeviceDriver+"/vk0/gpu-3"] != corev1.ResourceHealthStatusHealthy || len(got) != 2 {
		t.Errorf("health %v, want both Healthy", got)
	}
	pod.Annotations = map[string]string{AnnotationUnhealthyDevices: "gpu-3"}
	if err := p.UpdatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	got := health(r.last())
	if got["claim:gpu "+DeviceDriver+"/vk0/gpu-3"] != corev1.ResourceHealthStatusUnhealthy || got["claim:gpu "+DeviceDriver+"/vk0/gpu-0"] != corev1.ResourceHealthStatusHealthy {
		t.Errorf("health after the annotation %v, want gpu-3 Unhealthy, gpu-0 Healthy", got)
	}

	other := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "x", UID: "x"}}
	foreign := node.PodDevices{Devices: []node.AllocatedDevice{{Driver: DeviceDriver, Pool: "vk1", Device: "gpu-0"}}}
	if err := caps.Devices.PrepareDevices(ctx, other, foreign); !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "not one of node vk0's") {
		t.Errorf("PrepareDevices of another node's device: %v", err)
	}
	other.Annotations = map[string]string{AnnotationFailPrepareDevices: "broken"}
	if err := caps.Devices.PrepareDevices(ctx, other, devices); !errdefs.IsInvalidInput(err) || err.Error() != "broken" {
		t.Errorf("PrepareDevices with %s: %v", AnnotationFailPrepareDevices, err)
	}
}
