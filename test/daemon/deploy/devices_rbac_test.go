//go:build e2e

package deploy_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestRBACIsSufficientForDevices runs a mock node with devices with
// nothing but the manifests' ServiceAccount rights and the DeviceClass
// hack/deploy/devices ships: its ResourceSlice is published and a pod
// claiming a device runs, with nothing refused.
func TestRBACIsSufficientForDevices(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	applyManifests(t, c)
	devices := filepath.Join(deployDir, "devices")
	daemontest.ApplyShipped(t, c, devices)
	ns := c.Namespace(t)
	name := testcluster.UniqueName("vk")
	cfg := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{%q: {"devices": [{"name": "gpu", "count": 1}]}}`, name)), 0o600); err != nil {
		t.Fatal(err)
	}
	kubeconfig := serviceAccountKubeconfig(t, c, c.Info.NodeServer)
	d := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")), "--kubeconfig", kubeconfig, "--nodename", name, "--provider-config", cfg)
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	daemontest.Eventually(t, "the node's ResourceSlice", func() (bool, string) {
		l, err := c.Client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorNodeName, d.Name).String()})
		return err == nil && len(l.Items) == 1, fmt.Sprint(err)
	})

	claim := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Name: "gpu"},
		Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{Requests: []resourcev1.DeviceRequest{{
			Name: "gpu", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: mock.DeviceDriver},
		}}}},
	}
	if _, err := c.Client.ResourceV1().ResourceClaims(ns).Create(ctx, claim, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "p"},
		Spec: corev1.PodSpec{
			NodeSelector: map[string]string{corev1.LabelHostname: d.Name}, Tolerations: daemontest.Tolerate,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("gpu")}},
			Containers:     []corev1.Container{{Name: "c", Image: "busybox", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}}},
		},
	}
	daemontest.CreatePods(t, c.Client, ns, pod)
	daemontest.WaitPod(t, c.Client, ns, "p", "Running", daemontest.Running)
	if out := daemontest.Kubectl(t, c, "-n", ns, "exec", "p", "--", "printenv", mock.VisibleDevicesEnv); out != "0\n" {
		t.Errorf("%s = %q", mock.VisibleDevicesEnv, out)
	}
	if out := d.Output.String(); strings.Contains(strings.ToLower(out), "forbidden") {
		t.Errorf("the daemon was refused something it needs:\n%s", out)
	}
}
