package node

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"
)

// TestPodRefusalOf: a pod needing what the provider lacks is refused with
// the kubelet's reason; one that does not, or on a provider that has it,
// is not.
func TestPodRefusalOf(t *testing.T) {
	full := &Capabilities{Runtime: RuntimeFeatures{UserNamespaces: true, RecursiveReadOnlyMounts: true}, Devices: &deviceProvider{}}
	none := &Capabilities{}
	userns := func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(false) }
	rro := func(p *corev1.Pod) {
		p.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/d", ReadOnly: true, RecursiveReadOnly: ptr.To(corev1.RecursiveReadOnlyEnabled)}}
	}
	claim := func(p *corev1.Pod) {
		p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: ptr.To("my-gpu")}}
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.Pod)
		caps   *Capabilities
		event  string
		says   string
	}{
		{"plain pod", func(*corev1.Pod) {}, none, "", ""},
		{"hostUsers true", func(p *corev1.Pod) { p.Spec.HostUsers = ptr.To(true) }, none, "", ""},
		{"hostUsers false without user namespaces", userns, none, ReasonFailedCreatePodSandBox, "does not support user namespaces"},
		{"hostUsers false with user namespaces", userns, full, "", ""},
		{"recursiveReadOnly Enabled without it", rro, none, ReasonFailed, `volume "data" requested recursive read-only mode`},
		{"recursiveReadOnly Enabled with it", rro, full, "", ""},
		{"IfPossible is never refused", func(p *corev1.Pod) {
			rro(p)
			p.Spec.Containers[0].VolumeMounts[0].RecursiveReadOnly = ptr.To(corev1.RecursiveReadOnlyIfPossible)
		}, none, "", ""},
		{"a claim without devices", claim, none, ReasonFailedPrepareDevices, "ResourceClaim my-gpu"},
		{"a claim with devices", claim, full, "", ""},
		{"a template's claim not made yet", func(p *corev1.Pod) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
		}, none, ReasonFailedPrepareDevices, "ResourceClaim gpu"},
		{"a template's claim not needed", func(p *corev1.Pod) {
			p.Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimTemplateName: ptr.To("one-gpu")}}
			p.Status.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu"}}
		}, none, "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("u1", podRunning)
			pod.Spec.Containers = []corev1.Container{{Name: "c"}}
			tc.change(pod)
			r := podRefusalOf(pod, tc.caps)
			switch {
			case tc.event == "" && r != nil:
				t.Errorf("refused: %+v", r)
			case tc.event != "" && r == nil:
				t.Errorf("not refused, want %s", tc.event)
			case r != nil && (r.event != tc.event || !strings.Contains(r.message, tc.says)):
				t.Errorf("refused %s %q, want %s saying %q", r.event, r.message, tc.event, tc.says)
			}
		})
	}
}

// TestRuntimeHandlers: the Node shows the provider's features on its
// default handler, false ones included, as the kubelet writes them.
func TestRuntimeHandlers(t *testing.T) {
	h := RuntimeFeatures{UserNamespaces: true}.RuntimeHandlers()
	if len(h) != 1 || h[0].Name != "" || h[0].Features == nil ||
		!*h[0].Features.UserNamespaces || *h[0].Features.RecursiveReadOnlyMounts {
		t.Fatalf("runtimeHandlers %+v", h)
	}
}

// TestCapabilitiesOfRuntimeFeatures: a RuntimeFeaturesDeclarer's features
// are resolved once; a provider without one has none.
func TestCapabilitiesOfRuntimeFeatures(t *testing.T) {
	if c := CapabilitiesOf(runtimeDeclarer{nopProvider{}}); !c.Runtime.UserNamespaces {
		t.Error("declared user namespaces not resolved")
	}
	if c := CapabilitiesOf(nopProvider{}); c.Runtime != (RuntimeFeatures{}) {
		t.Errorf("a provider declaring nothing has %+v", c.Runtime)
	}
}

type runtimeDeclarer struct{ PodLifecycleHandler }

func (runtimeDeclarer) RuntimeFeatures() RuntimeFeatures {
	return RuntimeFeatures{UserNamespaces: true}
}

// TestRefuseSaysWhy: a refused pod is queued Pending with its containers
// waiting as the kubelet shows them (app containers after init ones
// PodInitializing), the reason as their message, and a Warning Event.
func TestRefuseSaysWhy(t *testing.T) {
	pc := newTestController(t, nopProvider{})
	pod := testPod("u1", podRunning)
	pod.Spec.HostUsers = ptr.To(false)
	pod.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	pod.Spec.Containers = []corev1.Container{{Name: "app"}}
	rec := pc.pods.get(podKey(pod))
	if !pc.refuse(context.Background(), pod, rec) {
		t.Fatal("a hostUsers: false pod on a provider without user namespaces was not refused")
	}
	pp := rec.view().providerViewOf(pod.UID)
	if pp == nil {
		t.Fatal("no status queued")
	}
	s := pp.Status
	if s.Phase != corev1.PodPending || len(s.InitContainerStatuses) != 1 || len(s.ContainerStatuses) != 1 {
		t.Fatalf("status %+v", s)
	}
	init, app := s.InitContainerStatuses[0].State.Waiting, s.ContainerStatuses[0].State.Waiting
	if init == nil || init.Reason != "ContainerCreating" || app == nil || app.Reason != "PodInitializing" ||
		!strings.Contains(app.Message, "does not support user namespaces") {
		t.Errorf("waiting: init %+v, app %+v", init, app)
	}
	select {
	case e := <-pc.recorder.(*record.FakeRecorder).Events:
		if !strings.HasPrefix(e, "Warning "+ReasonFailedCreatePodSandBox) {
			t.Errorf("event %q", e)
		}
	default:
		t.Error("no Event")
	}
}
