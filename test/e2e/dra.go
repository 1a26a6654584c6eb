package e2e

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/utils/ptr"
)

// RuleDevices means a node's devices are allocated and prepared as a kubelet's.
const RuleDevices = "contract: a provider's devices (DeviceProvider) are published as the node's ResourceSlices, and a pod whose claim the scheduler allocated from them runs with the claim reserved for it"

// DevicesPublishWait is how long TestDynamicResourceAllocation waits for
// the node's ResourceSlices before it skips, the node having none.
const DevicesPublishWait = 10 * time.Second

// TestDynamicResourceAllocation checks that, when the node publishes ResourceSlices (a
// provider with devices), a pod asking through a ResourceClaimTemplate for
// one device of its driver is scheduled to the node by the scheduler,
// which allocates a device the node's slices list; the pod runs, its
// status names the claim made for it, and the claim is reserved for it.
// A node without slices (after DevicesPublishWait) skips the test.
func (ts *EndToEndTestSuite) TestDynamicResourceAllocation(t *testing.T) {
	ctx := context.Background()
	// A node publishes its slices once it is registered: give it
	// DevicesPublishWait before taking it for a node without devices.
	served := map[string]bool{} // driver/pool/device
	driver := ""
	deadline := time.Now().Add(DevicesPublishWait)
	for driver == "" && time.Now().Before(deadline) {
		slices, err := ts.client.ResourceV1().ResourceSlices().List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector(resourcev1.ResourceSliceSelectorNodeName, ts.cfg.NodeName).String(),
		})
		if err != nil {
			t.Fatalf("listing the node's ResourceSlices: %v", err)
		}
		for _, s := range slices.Items {
			for _, d := range s.Spec.Devices {
				served[s.Spec.Driver+"/"+s.Spec.Pool.Name+"/"+d.Name] = true
				driver = s.Spec.Driver
			}
		}
		if driver == "" {
			time.Sleep(500 * time.Millisecond)
		}
	}
	if driver == "" {
		t.Skip("the node publishes no devices (its provider declares none)")
	}

	// A class of the suite's own, selecting the driver.
	class := &resourcev1.DeviceClass{
		ObjectMeta: metav1.ObjectMeta{Name: "vk-e2e-" + rand.String(6)},
		Spec: resourcev1.DeviceClassSpec{Selectors: []resourcev1.DeviceSelector{{
			CEL: &resourcev1.CELDeviceSelector{Expression: fmt.Sprintf("device.driver == %q", driver)},
		}}},
	}
	if _, err := ts.client.ResourceV1().DeviceClasses().Create(ctx, class, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating DeviceClass: %v", err)
	}
	defer func() { _ = ts.client.ResourceV1().DeviceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{}) }()
	tmpl := &resourcev1.ResourceClaimTemplate{
		ObjectMeta: metav1.ObjectMeta{Name: "one-device-" + rand.String(6), Namespace: ts.ns},
		Spec: resourcev1.ResourceClaimTemplateSpec{Spec: resourcev1.ResourceClaimSpec{Devices: resourcev1.DeviceClaim{
			Requests: []resourcev1.DeviceRequest{{Name: "dev", Exactly: &resourcev1.ExactDeviceRequest{DeviceClassName: class.Name}}},
		}}},
	}
	if _, err := ts.client.ResourceV1().ResourceClaimTemplates(ts.ns).Create(ctx, tmpl, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating ResourceClaimTemplate: %v", err)
	}
	defer func() {
		_ = ts.client.ResourceV1().ResourceClaimTemplates(ts.ns).Delete(ctx, tmpl.Name, metav1.DeleteOptions{})
	}()

	// Scheduled by the scheduler (which allocates claims), kept on the node.
	pod := ts.newPod("dra")
	pod.Spec.NodeName = ""
	pod.Spec.NodeSelector = map[string]string{corev1.LabelHostname: ts.cfg.NodeName}
	pod.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "dev", ResourceClaimTemplateName: ptr.To(tmpl.Name)}}
	pod.Spec.Containers[0].Resources.Claims = []corev1.ResourceClaim{{Name: "dev"}}
	pod = ts.create(t, pod)
	defer ts.deleteNow(pod.Name)
	pod = ts.waitPod(t, pod.Name, "Running with a device of the node ("+RuleDevices+")", func(p *corev1.Pod) bool {
		return p.Status.Phase == corev1.PodRunning
	})
	if pod.Spec.NodeName != ts.cfg.NodeName {
		t.Fatalf("pod scheduled to %q, want %q", pod.Spec.NodeName, ts.cfg.NodeName)
	}
	if len(pod.Status.ResourceClaimStatuses) != 1 || pod.Status.ResourceClaimStatuses[0].ResourceClaimName == nil {
		t.Fatalf("status.resourceClaimStatuses = %+v, want the claim made for pod claim dev", pod.Status.ResourceClaimStatuses)
	}
	name := *pod.Status.ResourceClaimStatuses[0].ResourceClaimName
	claim, err := ts.client.ResourceV1().ResourceClaims(ts.ns).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("ResourceClaim %s: %v", name, err)
	}
	if claim.Status.Allocation == nil || len(claim.Status.Allocation.Devices.Results) != 1 {
		t.Fatalf("ResourceClaim %s: allocation %+v, want one device", name, claim.Status.Allocation)
	}
	r := claim.Status.Allocation.Devices.Results[0]
	if id := r.Driver + "/" + r.Pool + "/" + r.Device; !served[id] {
		t.Errorf("ResourceClaim %s got device %s, not one the node's slices list (%s)", name, id, RuleDevices)
	}
	reserved := false
	for _, ref := range claim.Status.ReservedFor {
		reserved = reserved || ref.UID == pod.UID
	}
	if !reserved {
		t.Errorf("ResourceClaim %s is not reserved for pod %s: %+v", name, pod.Name, claim.Status.ReservedFor)
	}
}
