package grpcplugin_test

import (
	"context"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestDevicesThroughPlugin: a plugin whose provider has devices declares
// them; the daemon's side publishes what WatchDevices sends, and the
// devices PrepareDevices hands over are the ones the container sees. A
// plugin without devices is not a DeviceProvider to the daemon.
func TestDevicesThroughPlugin(t *testing.T) {
	dir := socketDir(t)
	cfg := filepath.Join(dir, "mock.json")
	writeFile(t, cfg, `{"vk0": {"devices": [{"name": "gpu", "count": 4, "attributes": {"model": "h200"}}]}}`)
	withDevices, err := mock.New(context.Background(), provider.InitConfig{NodeName: "vk0", OperatingSystem: "linux", ConfigPath: cfg})
	if err != nil {
		t.Fatal(err)
	}
	sock := filepath.Join(dir, "p.sock")
	servePlugin(t, sock, withDevices)
	p := dial(t, dir, sock)
	caps := node.CapabilitiesOf(p)
	if caps.Devices == nil {
		t.Fatal("a plugin with devices is not a DeviceProvider")
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	published := make(chan []node.DeviceDriver, 1)
	caps.Devices.NotifyDevices(ctx, func(d []node.DeviceDriver) { published <- d })
	select {
	case d := <-published:
		if len(d) != 1 || d[0].Name != mock.DeviceDriver || len(d[0].Pools) != 1 || d[0].Pools[0].Name != "vk0" || len(d[0].Pools[0].Devices) != 4 {
			t.Fatalf("published %+v", d)
		}
		if m := d[0].Pools[0].Devices[2].Attributes["model"].StringValue; m == nil || *m != "h200" {
			t.Errorf("device attributes lost on the way: %+v", d[0].Pools[0].Devices[2].Attributes)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no devices published")
	}

	seen := watch(ctx, p)
	pod := testPod("web")
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "gpu"}}
	dev := func(name string) node.AllocatedDevice {
		return node.AllocatedDevice{Claim: "gpu", ClaimName: "web-gpu", Request: "gpu", Driver: mock.DeviceDriver, Pool: "vk0", Device: name}
	}
	devices := node.PodDevices{Devices: []node.AllocatedDevice{dev("gpu-3"), dev("gpu-1")}}
	devices.Containers = map[string][]node.AllocatedDevice{"app": devices.Devices}
	if err := caps.Devices.PrepareDevices(ctx, pod, devices); err != nil {
		t.Fatal(err)
	}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	seen.waitPhase(t, "web", corev1.PodRunning)
	out := &attachIO{}
	if err := caps.Exec.RunInContainer(ctx, "ns", "web", "app", []string{"printenv", mock.VisibleDevicesEnv}, out); err != nil {
		t.Fatal(err)
	}
	if got := out.stdout.String(); got != "1,3\n" {
		t.Errorf("%s = %q, want 1,3", mock.VisibleDevicesEnv, got)
	}

	// A device the plugin does not have fails the pod, not a retry.
	other := testPod("other")
	foreign := node.AllocatedDevice{Claim: "gpu", Request: "gpu", Driver: mock.DeviceDriver, Pool: "vk0", Device: "gpu-9"}
	err = caps.Devices.PrepareDevices(ctx, other, node.PodDevices{Devices: []node.AllocatedDevice{foreign}})
	if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "gpu-9") {
		t.Errorf("an unknown device: %v, want InvalidInput naming it", err)
	}

	plainSock := filepath.Join(dir, "plain.sock")
	servePlugin(t, plainSock, newMock(t, dir, ""))
	if node.CapabilitiesOf(dial(t, dir, plainSock)).Devices != nil {
		t.Error("a plugin without devices is a DeviceProvider")
	}
}

// TestRuntimeFeaturesThroughPlugin: the runtime features a plugin's
// provider declares reach the daemon's side in the handshake, so its pods
// with hostUsers: false are not refused; a provider declaring none
// declares none through the plugin either.
func TestRuntimeFeaturesThroughPlugin(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "p.sock")
	servePlugin(t, sock, newMock(t, dir, ""))
	if got := node.CapabilitiesOf(dial(t, dir, sock)).Runtime; !got.UserNamespaces || !got.RecursiveReadOnlyMounts {
		t.Errorf("the mock's runtime features through a plugin: %+v, want both", got)
	}
	bareSock := filepath.Join(dir, "bare.sock")
	servePlugin(t, bareSock, struct{ node.Provider }{newMock(t, dir, "")})
	if got := node.CapabilitiesOf(dial(t, dir, bareSock)).Runtime; got != (node.RuntimeFeatures{}) {
		t.Errorf("a provider without runtime features declares %+v through a plugin", got)
	}
}
