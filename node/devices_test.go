package node

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

func TestValidateDevicesNamesTheRepeat(t *testing.T) {
	dev := func(names ...string) []resourcev1.Device {
		var out []resourcev1.Device
		for _, n := range names {
			out = append(out, resourcev1.Device{Name: n})
		}
		return out
	}
	for _, tc := range []struct {
		drivers []DeviceDriver
		want    string
	}{
		{[]DeviceDriver{{Name: "a.example.com", Pools: []DevicePool{{Name: "p", Devices: dev("x", "y")}}}}, ""},
		{[]DeviceDriver{{Name: "a.example.com", Pools: []DevicePool{{Name: "p", Devices: dev("x", "x")}}}}, `driver "a.example.com", pool "p": device "x" declared twice`},
		{[]DeviceDriver{{Name: "a.example.com", Pools: []DevicePool{{Name: "p"}, {Name: "p"}}}}, `driver "a.example.com": pool "p" declared twice`},
		{[]DeviceDriver{{Name: "a.example.com"}, {Name: "a.example.com"}}, `device driver "a.example.com" declared twice`},
		{[]DeviceDriver{{}}, "a device driver has no name"},
		// The same device name in two pools is two devices.
		{[]DeviceDriver{{Name: "a.example.com", Pools: []DevicePool{{Name: "p", Devices: dev("x")}, {Name: "q", Devices: dev("x")}}}}, ""},
	} {
		err := ValidateDevices(tc.drivers)
		if (err == nil) != (tc.want == "") || err != nil && err.Error() != tc.want {
			t.Errorf("ValidateDevices(%+v) = %v, want %q", tc.drivers, err, tc.want)
		}
	}
}

// draPod has claim gpu (requests a and b, from a template) used by
// container main whole and by container side for request b only, and claim
// nic (named) used by the init container.
func draPod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: "pod-uid"},
		Spec: corev1.PodSpec{
			ResourceClaims: []corev1.PodResourceClaim{
				{Name: "gpu", ResourceClaimTemplateName: ptr.To("tmpl")},
				{Name: "nic", ResourceClaimName: ptr.To("shared-nic")},
			},
			InitContainers: []corev1.Container{{Name: "init", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "nic"}}}}},
			Containers: []corev1.Container{
				{Name: "main", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu"}}}},
				{Name: "side", Resources: corev1.ResourceRequirements{Claims: []corev1.ResourceClaim{{Name: "gpu", Request: "b"}}}},
				{Name: "none"},
			},
		},
		Status: corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x")}}},
	}
}

// readyClaim is a claim allocated on node vk0 and reserved for pod.
func readyClaim(pod *corev1.Pod, name string, owned bool, results ...resourcev1.DeviceRequestAllocationResult) *resourcev1.ResourceClaim {
	c := &resourcev1.ResourceClaim{
		ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: name, UID: "claim-uid"},
		Status: resourcev1.ResourceClaimStatus{
			Allocation: &resourcev1.AllocationResult{
				Devices: resourcev1.DeviceAllocationResult{Results: results},
				NodeSelector: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{
					MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: []string{"vk0"}}},
				}}},
			},
			ReservedFor: []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: pod.Name, UID: pod.UID}},
		},
	}
	if owned {
		c.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: pod.Name, UID: pod.UID, Controller: ptr.To(true)}}
	}
	return c
}

func result(request, device string) resourcev1.DeviceRequestAllocationResult {
	return resourcev1.DeviceRequestAllocationResult{Request: request, Driver: "gpu.example.com", Pool: "vk0", Device: device}
}

// TestPodDevicesPerContainer: each container gets the devices of the
// claims, or claim requests, its resources.claims name, each with the
// opaque config that applies to its request.
func TestPodDevicesPerContainer(t *testing.T) {
	pod := draPod()
	gpu := readyClaim(pod, "p-gpu-x", true, result("a", "gpu-0"), result("b/big", "gpu-1"))
	gpu.Status.Allocation.Devices.Config = []resourcev1.DeviceAllocationConfiguration{
		{Source: resourcev1.AllocationConfigSourceClass, DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "gpu.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{"class":1}`)}}}},
		{Source: resourcev1.AllocationConfigSourceClaim, Requests: []string{"b"}, DeviceConfiguration: resourcev1.DeviceConfiguration{Opaque: &resourcev1.OpaqueDeviceConfiguration{Driver: "gpu.example.com", Parameters: runtime.RawExtension{Raw: []byte(`{"b":1}`)}}}},
	}
	nic := readyClaim(pod, "shared-nic", false, resourcev1.DeviceRequestAllocationResult{Request: "nic", Driver: "nic.example.com", Pool: "net", Device: "eth1"})
	got := podDevicesOf(pod, map[string]*resourcev1.ResourceClaim{"gpu": gpu, "nic": nic})

	names := func(ds []AllocatedDevice) string {
		var s []string
		for _, d := range ds {
			s = append(s, d.Claim+"/"+d.Request+"="+string(d.ID()))
		}
		return strings.Join(s, " ")
	}
	for c, want := range map[string]string{
		"main": "gpu/a=gpu.example.com/vk0/gpu-0 gpu/b/big=gpu.example.com/vk0/gpu-1",
		"side": "gpu/b/big=gpu.example.com/vk0/gpu-1",
		"init": "nic/nic=nic.example.com/net/eth1",
		"none": "",
	} {
		if g := names(got.Containers[c]); g != want {
			t.Errorf("container %s: %s, want %s", c, g, want)
		}
	}
	if len(got.Devices) != 3 {
		t.Errorf("Devices: %s, want all three", names(got.Devices))
	}
	side := got.Containers["side"][0]
	if side.ClaimName != "p-gpu-x" || len(side.Config) != 2 || string(side.Config[1].Opaque.Parameters.Raw) != `{"b":1}` {
		t.Errorf("gpu-1 (request b/big): claim %s config %+v, want both configs, the class's first", side.ClaimName, side.Config)
	}
	if main := got.Containers["main"][0]; len(main.Config) != 1 || main.Config[0].Source != resourcev1.AllocationConfigSourceClass {
		t.Errorf("gpu-0 (request a): config %+v, want the class's only", main.Config)
	}

	// allocatedResourcesStatus as the kubelet names it: claim:<claim>[/<request>].
	unhealthy := func(d AllocatedDevice) corev1.ResourceHealthStatus {
		if d.Device == "gpu-1" {
			return corev1.ResourceHealthStatusUnhealthy
		}
		return corev1.ResourceHealthStatusHealthy
	}
	st := got.ResourcesStatus(pod.Spec.Containers[1], unhealthy)
	if len(st) != 1 || st[0].Name != "claim:gpu/b" || len(st[0].Resources) != 1 ||
		st[0].Resources[0].ResourceID != "gpu.example.com/vk0/gpu-1" || st[0].Resources[0].Health != corev1.ResourceHealthStatusUnhealthy {
		t.Errorf("side's allocatedResourcesStatus = %+v", st)
	}
	if st := got.ResourcesStatus(pod.Spec.Containers[0], unhealthy); len(st) != 1 || st[0].Name != "claim:gpu" || len(st[0].Resources) != 2 {
		t.Errorf("main's allocatedResourcesStatus = %+v", st)
	}
	if st := got.ResourcesStatus(pod.Spec.Containers[2], unhealthy); st != nil {
		t.Errorf("a container without claims has allocatedResourcesStatus %+v", st)
	}
}

// TestClaimsReadyFor: a pod's claims are ready as the kubelet requires:
// made (a template's), made for the pod, reserved for it, allocated, and
// on this node; each other case is an error saying which. A claim the
// cache lacks or has stale is read from the API server, as the kubelet
// reads it; one ready in the cache is not.
func TestClaimsReadyFor(t *testing.T) {
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk0"}}
	other := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk1"}}
	pod := draPod()
	pod.Spec.ResourceClaims = pod.Spec.ResourceClaims[:1]
	ready := readyClaim(pod, "p-gpu-x", true, result("a", "gpu-0"))
	notOwned := readyClaim(pod, "p-gpu-x", false, result("a", "gpu-0"))
	unreserved := ready.DeepCopy()
	unreserved.Status.ReservedFor = []resourcev1.ResourceClaimConsumerReference{{Resource: "pods", Name: "q", UID: "other"}}
	unallocated := ready.DeepCopy()
	unallocated.Status.Allocation = nil
	noStatus := pod.DeepCopy()
	noStatus.Status.ResourceClaimStatuses = nil
	notNeeded := pod.DeepCopy()
	notNeeded.Status.ResourceClaimStatuses[0].ResourceClaimName = nil

	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		claim *resourcev1.ResourceClaim
		node  *corev1.Node
		want  string
		// live, if set, is the claim as the API server has it.
		live *resourcev1.ResourceClaim
	}{
		{"ready", pod, ready, node, "", nil},
		{"node unknown", pod, ready, nil, "", nil},
		{"claim not needed", notNeeded, nil, node, "", nil},
		{"template's claim not made", noStatus, ready, node, "ResourceClaim not created yet", nil},
		{"claim missing", pod, nil, node, `fetch ResourceClaim p-gpu-x: resourceclaim.resource.k8s.io "p-gpu-x" not found`, nil},
		{"not made for the pod", pod, notOwned, node, "was not created for Pod ns/p", nil},
		{"not reserved", pod, unreserved, node, "pod p (pod-uid) is not allowed to use ResourceClaim p-gpu-x (claim-uid)", nil},
		{"not allocated", pod, unallocated, node, "ResourceClaim p-gpu-x is not allocated", nil},
		{"another node's", pod, ready, other, "ResourceClaim p-gpu-x is allocated on other nodes than vk1", nil},
		// The cache lags: the API server's claim is the one that counts.
		{"allocated since the cache saw it", pod, unallocated, node, "", ready},
		{"not in the cache yet", pod, nil, node, "", ready},
		{"not allocated in either", pod, unallocated, node, "ResourceClaim p-gpu-x is not allocated", unallocated},
		{"ready in the cache: no read", pod, ready, node, "", unallocated},
	} {
		t.Run(tc.name, func(t *testing.T) {
			inf := informers.NewSharedInformerFactory(fake.NewClientset(), 0).Resource().V1().ResourceClaims()
			if tc.claim != nil {
				if err := inf.Informer().GetIndexer().Add(tc.claim); err != nil {
					t.Fatal(err)
				}
			}
			c := &podClaims{lister: inf.Lister()}
			if tc.live != nil {
				c.live = fake.NewClientset(tc.live).ResourceV1()
			}
			got, err := c.readyFor(context.Background(), tc.pod, tc.node)
			if tc.want == "" {
				if err != nil {
					t.Fatalf("readyFor: %v", err)
				}
				if (tc.claim != nil || tc.live != nil) && tc.pod == pod && got["gpu"] == nil {
					t.Fatalf("readyFor = %v, want claim gpu", got)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("readyFor: %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// deviceProvider prepares devices with err, recording what it was given.
type deviceProvider struct {
	nopProvider
	err   error
	given []PodDevices
}

func (p *deviceProvider) NotifyDevices(context.Context, func([]DeviceDriver)) {}
func (p *deviceProvider) PrepareDevices(_ context.Context, _ *corev1.Pod, d PodDevices) error {
	p.given = append(p.given, d)
	return p.err
}

// TestPrepareDevices: a pod whose claims are ready has its devices handed
// to the provider; one the provider cannot prepare (InvalidInput) is
// Failed with the reason and its cause; a claim not ready holds the pod
// back with the kubelet's event; a provider with devices needs the claim
// informer.
func TestPrepareDevices(t *testing.T) {
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	pods := factory.Core().V1().Pods()
	claims := factory.Resource().V1().ResourceClaims()
	p := &deviceProvider{}
	recorder := record.NewFakeRecorder(10)
	cfg := PodControllerConfig{PodClient: client.CoreV1(), PodInformer: pods, EventRecorder: recorder, Provider: p}
	if _, err := NewPodController(cfg); err == nil || !strings.Contains(err.Error(), "ResourceClaimInformer is required") {
		t.Fatalf("NewPodController without the claim informer: %v", err)
	}
	cfg.ResourceClaimInformer = claims
	pc, err := NewPodController(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pod := draPod()
	pod.Spec.ResourceClaims = pod.Spec.ResourceClaims[:1]

	// Not made yet: waits, with the kubelet's event, and the provider is not asked.
	if handled, err := pc.prepareDevices(ctx, pod, pod, pc.pods.get("ns/p")); handled || err == nil {
		t.Fatalf("prepareDevices without the claim = %v, %v; want an error to retry", handled, err)
	}
	if ev := <-recorder.Events; !strings.Contains(ev, ReasonFailedPrepareDevices) || !strings.Contains(ev, "Failed to prepare dynamic resources: prepare dynamic resources: fetch ResourceClaim p-gpu-x") {
		t.Errorf("event %q", ev)
	}
	if len(p.given) != 0 {
		t.Fatal("the provider was asked to prepare devices of a claim not ready")
	}

	if err := claims.Informer().GetIndexer().Add(readyClaim(pod, "p-gpu-x", true, result("a", "gpu-0"))); err != nil {
		t.Fatal(err)
	}
	if handled, err := pc.prepareDevices(ctx, pod, pod, pc.pods.get("ns/p")); handled || err != nil {
		t.Fatalf("prepareDevices = %v, %v", handled, err)
	}
	if len(p.given) != 1 || len(p.given[0].Containers["main"]) != 1 || p.given[0].Containers["main"][0].Device != "gpu-0" {
		t.Fatalf("the provider got %+v, want gpu-0 for main", p.given)
	}

	p.err = errdefs.InvalidInput("gpu-0 is on fire")
	if handled, err := pc.prepareDevices(ctx, pod, pod, pc.pods.get("ns/p")); !handled || err != nil {
		t.Fatalf("prepareDevices with a device the provider cannot prepare = %v, %v; want the pod failed", handled, err)
	}
	v, _ := pc.LoadPod("ns/p")
	failed, _ := v.(*corev1.Pod)
	if failed == nil || failed.Status.Phase != corev1.PodFailed || failed.Status.Reason != ReasonFailedPrepareDevices || !strings.Contains(failed.Status.Message, "gpu-0 is on fire") {
		t.Fatalf("status queued: %+v", v)
	}
}

// TestMergeStatusKeepsClaimStatuses: the ResourceClaims' statuses in a
// pod's status are the resourceclaim controller's: a provider's status
// neither drops nor replaces them.
func TestMergeStatusKeepsClaimStatuses(t *testing.T) {
	current := corev1.PodStatus{
		Phase:                       corev1.PodPending,
		ResourceClaimStatuses:       []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To("p-gpu-x")}},
		ExtendedResourceClaimStatus: &corev1.PodExtendedResourceClaimStatus{ResourceClaimName: "p-ext"},
	}
	provider := corev1.PodStatus{Phase: corev1.PodRunning, ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "gpu"}}}
	got := mergeStatus(current, provider)
	if got.Phase != corev1.PodRunning || len(got.ResourceClaimStatuses) != 1 || ptr.Deref(got.ResourceClaimStatuses[0].ResourceClaimName, "") != "p-gpu-x" ||
		got.ExtendedResourceClaimStatus == nil || got.ExtendedResourceClaimStatus.ResourceClaimName != "p-ext" {
		t.Errorf("mergeStatus = %+v", got)
	}
}
