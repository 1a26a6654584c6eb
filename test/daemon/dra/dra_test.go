//go:build e2e

package dra_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// deviceClassFile is the DeviceClass hack/deploy ships for the mock.
const deviceClassFile = "../../../hack/deploy/devices/mock-gpu.yaml"

// devicesConfig is a node of 8 mock GPUs: gpu-0..gpu-5 H100s, big-0 and
// big-1 H200s, at indices 0..7.
const devicesConfig = `[
  {"name": "gpu", "count": 6, "attributes": {"model": "h100", "memory": "80Gi"}},
  {"name": "big", "count": 2, "attributes": {"model": "h200", "memory": "141Gi"}}
]`

// templates are the walkthrough's ResourceClaimTemplates (docs/devices.md):
// one device of the mock's class, and one H200 by a CEL selector.
var templates = []string{
	daemontest.ClaimTemplate("one-gpu", "gpu.mock.vkubelet.io", ""),
	daemontest.ClaimTemplate("one-h200", "gpu.mock.vkubelet.io", `device.attributes["gpu.mock.vkubelet.io"].model == "h200"`),
}

// draNode starts a mock node with the devices in its own node host (so
// kubectl exec reaches it), the mock served in a plugin behind --provider
// grpc if viaPlugin, applies the mock's DeviceClass and returns the
// daemon and a namespace holding the templates.
func draNode(t *testing.T, c *testcluster.Cluster, viaPlugin bool) (*daemontest.Daemon, string) {
	t.Helper()
	name := testcluster.UniqueName("vk-dra")
	cfg := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{%q: {"devices": %s}}`, name, devicesConfig)), 0o600); err != nil {
		t.Fatal(err)
	}
	daemontest.ApplyShipped(t, c, deviceClassFile)
	host, args := c.AddHost(t, testcluster.UniqueName("h")), []string{"--nodename", name, "--provider-config", cfg}
	var d *daemontest.Daemon
	if viaPlugin {
		d, _ = daemontest.StartWithPlugin(t, c, host, args...)
	} else {
		d = daemontest.Start(t, c, host, args...)
	}
	daemontest.WaitNodeReady(t, c.Client, name)
	ns := c.Namespace(t)
	daemontest.Apply(t, c, ns, templates...)
	return d, ns
}

// nodeSlices are the devices the node's ResourceSlices list, by name.
func nodeSlices(c *testcluster.Cluster, node string) (map[string]resourcev1.Device, error) {
	list, err := c.Client.ResourceV1().ResourceSlices().List(context.Background(), metav1.ListOptions{
		FieldSelector: fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorNodeName, node).String(),
	})
	if err != nil {
		return nil, err
	}
	out := map[string]resourcev1.Device{}
	for _, s := range list.Items {
		if s.Spec.Driver != mock.DeviceDriver || s.Spec.Pool.Name != node {
			return nil, fmt.Errorf("slice %s: driver %q pool %q, want %q and %q", s.Name, s.Spec.Driver, s.Spec.Pool.Name, mock.DeviceDriver, node)
		}
		for _, d := range s.Spec.Devices {
			out[d.Name] = d
		}
	}
	return out, nil
}

// gpuPod is a pod for the node (scheduled by the scheduler, kept on the
// node by its hostname) with one claim from template.
func gpuPod(name, node, template string, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: corev1.PodSpec{
			NodeSelector:   map[string]string{corev1.LabelHostname: node},
			Tolerations:    daemontest.Tolerate,
			ResourceClaims: []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To(template)}},
			Containers: []corev1.Container{{
				Name: "main", Image: "busybox",
				Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}},
			}},
			TerminationGracePeriodSeconds: ptr.To[int64](0),
		},
	}
}

// allocatedDevice is the device the scheduler allocated to the pod's claim
// gpu, checking it is the node's and reserved for the pod.
func allocatedDevice(t *testing.T, c *testcluster.Cluster, ns string, pod *corev1.Pod) string {
	t.Helper()
	if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("pod %s: resourceClaimStatuses %+v", pod.Name, pod.Status.ResourceClaimStatuses)
	}
	claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(context.Background(), *pod.Status.ResourceClaimStatuses[0].ResourceClaimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	a := claim.Status.Allocation
	if a == nil || len(a.Devices.Results) != 1 {
		t.Fatalf("claim %s: allocation %+v", claim.Name, a)
	}
	r := a.Devices.Results[0]
	if r.Driver != mock.DeviceDriver || r.Pool != pod.Spec.NodeName {
		t.Fatalf("claim %s: device %s/%s/%s is not the node's", claim.Name, r.Driver, r.Pool, r.Device)
	}
	if !slices.ContainsFunc(claim.Status.ReservedFor, func(ref resourcev1.ResourceClaimConsumerReference) bool { return ref.UID == pod.UID }) {
		t.Fatalf("claim %s is not reserved for pod %s: %+v", claim.Name, pod.Name, claim.Status.ReservedFor)
	}
	return r.Device
}

// waitUnschedulable waits for the scheduler to find no node for the pod
// and returns its message.
func waitUnschedulable(t *testing.T, c *testcluster.Cluster, ns, name string) string {
	t.Helper()
	var msg string
	daemontest.WaitPod(t, c.Client, ns, name, "Pending, Unschedulable by the scheduler", func(p *corev1.Pod) bool {
		for _, cond := range p.Status.Conditions {
			if cond.Type == corev1.PodScheduled && cond.Status == corev1.ConditionFalse && cond.Reason == corev1.PodReasonUnschedulable {
				msg = cond.Message
				return p.Status.Phase == corev1.PodPending && p.Spec.NodeName == ""
			}
		}
		return false
	})
	return msg
}

// TestDevicesScheduledPreparedAndSeen: the mock's 8 devices are published
// as the node's ResourceSlice; 8 pods each claiming one device through a
// ResourceClaimTemplate run, each seeing a different device (env and
// file); a 9th is left Pending by the scheduler, and runs once one of the
// 8 is deleted.
func TestDevicesScheduledPreparedAndSeen(t *testing.T) {
	c := testcluster.Shared(t)
	d, ns := draNode(t, c, false)
	daemontest.Eventually(t, "the node's ResourceSlice with 8 devices", func() (bool, string) {
		devs, err := nodeSlices(c, d.Name)
		if err != nil {
			return false, err.Error()
		}
		if len(devs) != 8 {
			return false, fmt.Sprintf("%d devices", len(devs))
		}
		big := devs["big-1"]
		model, memory, index := big.Attributes["model"].StringValue, big.Attributes["memory"].StringValue, big.Attributes["index"].IntValue
		return model != nil && *model == "h200" && memory != nil && *memory == "141Gi" && index != nil && *index == 7, fmt.Sprintf("big-1: %+v", big.Attributes)
	})

	var pods []*corev1.Pod
	for i := range 8 {
		pods = append(pods, gpuPod(fmt.Sprintf("gpu-%d", i), d.Name, "one-gpu", nil))
	}
	daemontest.CreatePods(t, c.Client, ns, pods...)
	seen := map[string]string{} // VISIBLE_DEVICES to pod
	for _, p := range pods {
		got := daemontest.WaitPod(t, c.Client, ns, p.Name, "Running", daemontest.Running)
		dev := allocatedDevice(t, c, ns, got)
		visible := strings.TrimSpace(daemontest.Kubectl(t, c, "-n", ns, "exec", p.Name, "--", "printenv", mock.VisibleDevicesEnv))
		if other, dup := seen[visible]; dup {
			t.Fatalf("pods %s and %s both see %s=%s", other, p.Name, mock.VisibleDevicesEnv, visible)
		}
		seen[visible] = p.Name
		file := daemontest.Kubectl(t, c, "-n", ns, "exec", p.Name, "--", "cat", mock.DevicesFile)
		if want := visible + " " + dev + "\n"; file != want {
			t.Errorf("pod %s: %s is %q, want %q (its allocated device)", p.Name, mock.DevicesFile, file, want)
		}
	}
	for i := range 8 {
		if _, ok := seen[fmt.Sprint(i)]; !ok {
			t.Errorf("no pod sees device %d: %v", i, seen)
		}
	}
	// The scheduler allocated and reserved each claim before it bound the
	// pod, so no pod waited for one: a claim the daemon's cache had not
	// seen ready yet was read from the API server, as the kubelet reads it.
	evs, err := c.Client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=FailedPrepareDynamicResources"})
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range evs.Items {
		t.Errorf("pod %s waited for its claims: %s", ev.InvolvedObject.Name, ev.Message)
	}

	ninth := gpuPod("gpu-8", d.Name, "one-gpu", nil)
	daemontest.CreatePods(t, c.Client, ns, ninth)
	msg := waitUnschedulable(t, c, ns, ninth.Name)
	if !strings.Contains(msg, "cannot allocate all claims") {
		t.Errorf("the 9th pod's PodScheduled message %q does not say its claim cannot be allocated", msg)
	}
	daemontest.Kubectl(t, c, "-n", ns, "delete", "pod", "gpu-3", "--grace-period=0", "--force")
	got := daemontest.WaitPod(t, c.Client, ns, ninth.Name, "Running once gpu-3 is gone", daemontest.Running)
	allocatedDevice(t, c, ns, got)

	// The node goes: its slices go with it (owned by the Node).
	d.Shutdown(t)
	if err := c.Client.CoreV1().Nodes().Delete(context.Background(), d.Name, daemontest.DeleteNow); err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "the node's ResourceSlices removed with the Node", func() (bool, string) {
		devs, err := nodeSlices(c, d.Name)
		return err == nil && len(devs) == 0, fmt.Sprintf("%d devices, %v", len(devs), err)
	})
}

// TestDeviceSelectorHealthAndFailures: a CEL selector on the model picks
// only the H200s (a third H200 pod stays Pending); a device the pod's
// annotation marks unhealthy shows in allocatedResourcesStatus; a pod whose
// devices the provider cannot prepare fails with the reason; a claim of a
// class no slice serves stays Pending with the scheduler's reason.
func TestDeviceSelectorHealthAndFailures(t *testing.T) {
	c := testcluster.Shared(t)
	d, ns := draNode(t, c, false)

	h200 := []*corev1.Pod{gpuPod("h200-0", d.Name, "one-h200", nil), gpuPod("h200-1", d.Name, "one-h200", nil)}
	daemontest.CreatePods(t, c.Client, ns, h200...)
	for _, p := range h200 {
		got := daemontest.WaitPod(t, c.Client, ns, p.Name, "Running", daemontest.Running)
		if dev := allocatedDevice(t, c, ns, got); !strings.HasPrefix(dev, "big-") {
			t.Errorf("pod %s got device %s, not an H200 (big-0, big-1)", p.Name, dev)
		}
	}
	third := gpuPod("h200-2", d.Name, "one-h200", nil)
	daemontest.CreatePods(t, c.Client, ns, third)
	waitUnschedulable(t, c, ns, third.Name)

	// Health: Healthy, then Unhealthy once annotated.
	health := func(want corev1.ResourceHealthStatus) func(*corev1.Pod) bool {
		return func(p *corev1.Pod) bool {
			if len(p.Status.ContainerStatuses) != 1 {
				return false
			}
			rs := p.Status.ContainerStatuses[0].AllocatedResourcesStatus
			return len(rs) == 1 && rs[0].Name == "claim:gpu" && len(rs[0].Resources) == 1 && rs[0].Resources[0].Health == want &&
				strings.HasPrefix(string(rs[0].Resources[0].ResourceID), mock.DeviceDriver+"/"+d.Name+"/big-")
		}
	}
	daemontest.WaitPod(t, c.Client, ns, "h200-0", "allocatedResourcesStatus Healthy", health(corev1.ResourceHealthStatusHealthy))
	daemontest.Kubectl(t, c, "-n", ns, "annotate", "pod", "h200-0", mock.AnnotationUnhealthyDevices+"=*")
	daemontest.WaitPod(t, c.Client, ns, "h200-0", "allocatedResourcesStatus Unhealthy", health(corev1.ResourceHealthStatusUnhealthy))

	// A device the provider cannot prepare fails the pod.
	failing := gpuPod("cannot-prepare", d.Name, "one-gpu", map[string]string{mock.AnnotationFailPrepareDevices: "the GPU is on fire"})
	daemontest.CreatePods(t, c.Client, ns, failing)
	got := daemontest.WaitPod(t, c.Client, ns, failing.Name, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if got.Status.Reason != "FailedPrepareDynamicResources" || !strings.Contains(got.Status.Message, "the GPU is on fire") {
		t.Errorf("failed pod: reason %q message %q, want FailedPrepareDynamicResources naming the cause", got.Status.Reason, got.Status.Message)
	}

	// A class no slice serves.
	class := testcluster.UniqueName("vk-e2e-none")
	classFile := filepath.Join(t.TempDir(), "none.yaml")
	manifest := fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: DeviceClass
metadata:
  name: %s
spec:
  selectors:
  - cel:
      expression: device.driver == "none.mock.vkubelet.io"
`, class)
	if err := os.WriteFile(classFile, []byte(manifest), 0o600); err != nil {
		t.Fatal(err)
	}
	daemontest.ApplyFile(t, c, classFile)
	daemontest.Apply(t, c, ns, daemontest.ClaimTemplate("none", class, ""))
	none := gpuPod("no-device", d.Name, "none", nil)
	daemontest.CreatePods(t, c.Client, ns, none)
	msg := waitUnschedulable(t, c, ns, none.Name)
	if !strings.Contains(msg, "cannot allocate all claims") {
		t.Errorf("PodScheduled message %q does not say the claim cannot be allocated", msg)
	}
	// Still Pending a while later: nothing serves it.
	time.Sleep(2 * time.Second)
	if p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), none.Name, metav1.GetOptions{}); err != nil || p.Spec.NodeName != "" || p.Status.Phase != corev1.PodPending {
		t.Errorf("pod of the unserved class: %v, node %q, phase %q", err, p.Spec.NodeName, p.Status.Phase)
	}
}

// TestUnreservedClaimWaits: a pod bound to the node directly (not by the
// scheduler) has a claim nobody allocated or reserved: it waits with the
// kubelet's event and is not handed to the provider; once the claim is
// allocated on the node and reserved for it, it runs.
func TestUnreservedClaimWaits(t *testing.T) {
	c := testcluster.Shared(t)
	d, ns := draNode(t, c, false)
	ctx := context.Background()
	pod := gpuPod("bound", d.Name, "one-gpu", nil)
	pod.Spec.NodeName = d.Name
	daemontest.CreatePods(t, c.Client, ns, pod)
	daemontest.Eventually(t, "a FailedPrepareDynamicResources event on the pod", func() (bool, string) {
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=bound,reason=FailedPrepareDynamicResources"})
		if err != nil || len(evs.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		return strings.Contains(evs.Items[0].Message, "is not allowed to use ResourceClaim") || strings.Contains(evs.Items[0].Message, "ResourceClaim not created yet"), evs.Items[0].Message
	})
	got, err := c.Client.CoreV1().Pods(ns).Get(ctx, "bound", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Status.Phase != corev1.PodPending || len(got.Status.ContainerStatuses) > 0 && got.Status.ContainerStatuses[0].State.Running != nil {
		t.Fatalf("pod with an unreserved claim: phase %s, %+v", got.Status.Phase, got.Status.ContainerStatuses)
	}

	// Allocate and reserve the claim as the scheduler would.
	var claimName string
	daemontest.Eventually(t, "the claim made for the pod", func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "bound", metav1.GetOptions{})
		if err != nil || len(p.Status.ResourceClaimStatuses) == 0 || p.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
			return false, fmt.Sprint(err)
		}
		got, claimName = p, *p.Status.ResourceClaimStatuses[0].ResourceClaimName
		return true, ""
	})
	claim, err := c.Client.ResourceV1().ResourceClaims(ns).Get(ctx, claimName, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	claim.Status.Allocation = &resourcev1.AllocationResult{
		Devices: resourcev1.DeviceAllocationResult{Results: []resourcev1.DeviceRequestAllocationResult{{
			Request: "gpu", Driver: mock.DeviceDriver, Pool: d.Name, Device: "gpu-5",
		}}},
		NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
			MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{d.Name}}},
		}}},
	}
	claim.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "bound", UID: got.UID}}
	if _, err := c.Client.ResourceV1().ResourceClaims(ns).UpdateStatus(ctx, claim, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitPod(t, c.Client, ns, "bound", "Running once its claim is reserved", daemontest.Running)
	if visible := strings.TrimSpace(daemontest.Kubectl(t, c, "-n", ns, "exec", "bound", "--", "printenv", mock.VisibleDevicesEnv)); visible != "5" {
		t.Errorf("%s = %q, want 5 (gpu-5)", mock.VisibleDevicesEnv, visible)
	}
}

// TestDuplicateDeviceIsOneLineError: a config declaring a device twice
// stops the daemon at start with one line naming it.
func TestDuplicateDeviceIsOneLineError(t *testing.T) {
	c := testcluster.Shared(t)
	cfg := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(cfg, []byte(`{"vk-dup": {"devices": [{"name": "gpu", "count": 2}, {"name": "gpu-1"}]}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	code, out := daemontest.Run(t, "--provider", "mock", "--nodename", "vk-dup", "--node-ip", "127.0.0.1", "--metrics-addr", "",
		"--kubeconfig", c.Info.Kubeconfig, "--provider-config", cfg)
	if code == 0 || strings.Contains(out, "\n") || !strings.Contains(out, `devices: device "gpu-1" declared twice`) {
		t.Errorf("exit %d, output:\n%s\nwant one line naming gpu-1 declared twice", code, out)
	}
}

// TestDevicesOnManyNodes: with --node-count each node of the process
// publishes its own devices and checks its pods' claims (the nodes share
// the process's ResourceClaim informer).
func TestDevicesOnManyNodes(t *testing.T) {
	c := testcluster.Shared(t)
	name := testcluster.UniqueName("vk-dram")
	cfg := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{%q: {"devices": [{"name": "gpu", "count": 1}]}}`, name+"-*")), 0o600); err != nil {
		t.Fatal(err)
	}
	daemontest.ApplyShipped(t, c, deviceClassFile)
	daemontest.Start(t, c, nil, "--nodename", name, "--node-count", "2", "--provider-config", cfg)
	ns := c.Namespace(t)
	daemontest.Apply(t, c, ns, templates...)
	for i := range 2 {
		node := fmt.Sprintf("%s-%d", name, i)
		daemontest.WaitNodeReady(t, c.Client, node)
		daemontest.Eventually(t, "node "+node+"'s ResourceSlice", func() (bool, string) {
			devs, err := nodeSlices(c, node)
			return err == nil && len(devs) == 1, fmt.Sprintf("%v, %v", devs, err)
		})
		pod := gpuPod(fmt.Sprintf("gpu-on-%d", i), node, "one-gpu", nil)
		daemontest.CreatePods(t, c.Client, ns, pod)
		got := daemontest.WaitPod(t, c.Client, ns, pod.Name, "Running", daemontest.Running)
		if dev := allocatedDevice(t, c, ns, got); dev != "gpu-0" || got.Spec.NodeName != node {
			t.Errorf("pod %s: device %s on %s", pod.Name, dev, got.Spec.NodeName)
		}
	}
}
