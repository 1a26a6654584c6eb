//go:build e2e

package dra_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestDevicesThroughPlugin: the mock's devices served by a plugin process
// behind --provider grpc are published as the node's ResourceSlice, and
// a pod claiming one runs and sees the device the scheduler allocated.
func TestDevicesThroughPlugin(t *testing.T) {
	c := testcluster.Shared(t)
	d, ns := draNode(t, c, true)
	daemontest.Eventually(t, "the node's ResourceSlice with 8 devices, through the plugin", func() (bool, string) {
		devs, err := nodeSlices(c, d.Name)
		if err != nil {
			return false, err.Error()
		}
		return len(devs) == 8, fmt.Sprintf("%d devices", len(devs))
	})
	pod := gpuPod("gpu", d.Name, "one-h200", nil)
	daemontest.CreatePods(t, c.Client, ns, pod)
	got := daemontest.WaitPod(t, c.Client, ns, pod.Name, "Running", daemontest.Running)
	dev := allocatedDevice(t, c, ns, got)
	if !strings.HasPrefix(dev, "big-") {
		t.Errorf("the h200 template got device %s, not an H200", dev)
	}
	file := daemontest.Kubectl(t, c, "-n", ns, "exec", pod.Name, "--", "cat", mock.DevicesFile)
	if !strings.HasSuffix(file, " "+dev+"\n") || strings.Count(file, "\n") != 1 {
		t.Errorf("%s is %q, want the one allocated device %s", mock.DevicesFile, file, dev)
	}
}
