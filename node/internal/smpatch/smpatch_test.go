package smpatch

import (
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/utils/ptr"
)

// statusGen makes pod statuses that differ in every way a status can:
// each field set or not, merge lists gaining, losing and changing
// elements, times with nanoseconds.
type statusGen struct{ r *rand.Rand }

func (g statusGen) pick(options ...string) string { return options[g.r.IntN(len(options))] }
func (g statusGen) maybe() bool                   { return g.r.IntN(2) == 0 }

func (g statusGen) time() metav1.Time {
	if g.r.IntN(5) == 0 {
		return metav1.Time{}
	}
	// Few distinct seconds, so equal seconds with different nanoseconds
	// come up often.
	return metav1.NewTime(time.Unix(1_800_000_000+int64(g.r.IntN(3)), int64(g.r.IntN(1e9))))
}

func (g statusGen) status() corev1.PodStatus {
	s := corev1.PodStatus{
		Phase:             corev1.PodPhase(g.pick("", "Pending", "Running", "Succeeded")),
		Message:           g.pick("", "", "a message with \"quotes\" and <html>"),
		Reason:            g.pick("", "Evicted"),
		NominatedNodeName: g.pick("", "n1"),
		HostIP:            g.pick("", "10.0.0.1"),
		PodIP:             g.pick("", "10.244.0.1", "10.244.0.2"),
		QOSClass:          corev1.PodQOSClass(g.pick("", "BestEffort", "Guaranteed")),
		Resize:            corev1.PodResizeStatus(g.pick("", "", "InProgress")), //nolint:staticcheck // the diff must still carry the deprecated field
	}
	if g.maybe() {
		s.ObservedGeneration = int64(g.r.IntN(3))
	}
	if g.maybe() {
		t := g.time()
		s.StartTime = &t
	}
	for _, ip := range []string{"10.0.0.1", "fd00::1"} {
		if g.maybe() {
			s.HostIPs = append(s.HostIPs, corev1.HostIP{IP: ip})
		}
	}
	for _, ip := range []string{"10.244.0.1", "10.244.0.2", "fd00::2"} {
		if g.maybe() {
			s.PodIPs = append(s.PodIPs, corev1.PodIP{IP: ip})
		}
	}
	types := []corev1.PodConditionType{corev1.PodReady, corev1.ContainersReady, corev1.PodInitialized, corev1.PodScheduled, "example.com/gate"}
	g.r.Shuffle(len(types), func(i, j int) { types[i], types[j] = types[j], types[i] })
	for _, t := range types {
		if g.r.IntN(3) == 0 {
			continue
		}
		s.Conditions = append(s.Conditions, corev1.PodCondition{
			Type:               t,
			Status:             corev1.ConditionStatus(g.pick("True", "False")),
			ObservedGeneration: int64(g.r.IntN(2)),
			LastProbeTime:      g.time(),
			LastTransitionTime: g.time(),
			Reason:             g.pick("", "ContainersNotReady"),
			Message:            g.pick("", "containers with unready status: [main]"),
		})
	}
	for _, name := range []string{"main", "sidecar"} {
		if g.maybe() {
			s.ContainerStatuses = append(s.ContainerStatuses, g.container(name))
		}
	}
	if g.r.IntN(4) == 0 {
		s.InitContainerStatuses = []corev1.ContainerStatus{g.container("init")}
	}
	if g.maybe() {
		s.AllocatedResources = g.resources()
	}
	if g.r.IntN(3) == 0 {
		s.Resources = &corev1.ResourceRequirements{Requests: g.resources(), Limits: g.resources()}
	}
	if g.r.IntN(4) == 0 {
		s.ResourceClaimStatuses = []corev1.PodResourceClaimStatus{{Name: "gpu", ResourceClaimName: ptr.To(g.pick("a", "b"))}}
	}
	return s
}

func (g statusGen) resources() corev1.ResourceList {
	l := corev1.ResourceList{}
	if g.maybe() {
		l[corev1.ResourceCPU] = resource.MustParse(g.pick("100m", "1", "1000m"))
	}
	if g.maybe() {
		l[corev1.ResourceMemory] = resource.MustParse(g.pick("64Mi", "128Mi"))
	}
	if len(l) == 0 && g.maybe() {
		return nil
	}
	return l
}

func (g statusGen) container(name string) corev1.ContainerStatus {
	c := corev1.ContainerStatus{
		Name: name, Image: "busybox", ImageID: g.pick("", "mock://busybox"), ContainerID: g.pick("", "mock://1/"+name),
		Ready: g.maybe(), RestartCount: int32(g.r.IntN(2)),
	}
	if g.maybe() {
		c.Started = ptr.To(g.maybe())
	}
	switch g.r.IntN(3) {
	case 0:
		c.State.Running = &corev1.ContainerStateRunning{StartedAt: g.time()}
	case 1:
		c.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: int32(g.r.IntN(2)), Reason: g.pick("Completed", "Error"), FinishedAt: g.time()}
	default:
		c.State.Waiting = &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}
	}
	if g.maybe() {
		c.AllocatedResources = g.resources()
	}
	return c
}

// mutate changes a few parts of s, so that pairs are often close, as a
// status and its next one are.
func (g statusGen) mutate(s corev1.PodStatus) corev1.PodStatus {
	s = *s.DeepCopy()
	other := g.status()
	for range 1 + g.r.IntN(3) {
		switch g.r.IntN(8) {
		case 0:
			s.Phase, s.Reason, s.Message = other.Phase, other.Reason, other.Message
		case 1:
			s.Conditions = other.Conditions
		case 2:
			if len(s.Conditions) > 0 {
				i := g.r.IntN(len(s.Conditions))
				s.Conditions[i].Status, s.Conditions[i].Reason = corev1.ConditionStatus(g.pick("True", "False", "Unknown")), ""
				s.Conditions[i].LastTransitionTime = g.time()
			}
		case 3:
			s.ContainerStatuses = other.ContainerStatuses
		case 4:
			s.PodIPs, s.HostIPs, s.PodIP = other.PodIPs, other.HostIPs, other.PodIP
		case 5:
			s.StartTime = other.StartTime
		case 6:
			s.AllocatedResources, s.Resources = other.AllocatedResources, other.Resources
		default:
			s.ResourceClaimStatuses = other.ResourceClaimStatuses
		}
	}
	return s
}

// TestDiffAppliesAsTheJSONPatchDoes applies the patch Diff builds and the
// one CreateTwoWayMergePatch builds from the same two statuses to the old
// pod, with the API server's patch code, and asks for the same pod.
func TestDiffAppliesAsTheJSONPatchDoes(t *testing.T) {
	g := statusGen{rand.New(rand.NewPCG(1, 2))}
	var unsupported, empty, reorderedOnly int
	for i := range 5000 {
		old := g.status()
		var new corev1.PodStatus
		if i%2 == 0 {
			new = g.mutate(old)
		} else {
			new = g.status()
		}
		switch i % 10 {
		case 0:
			new = *old.DeepCopy() // unchanged but for the nanoseconds below
			if new.StartTime != nil {
				new.StartTime = ptr.To(metav1.NewTime(new.StartTime.Add(time.Duration(g.r.IntN(1000)))))
			}
		case 5:
			new = *old.DeepCopy() // the same conditions in another order
			g.r.Shuffle(len(new.Conditions), func(i, j int) { new.Conditions[i], new.Conditions[j] = new.Conditions[j], new.Conditions[i] })
		}
		ours, err := Diff(&old, &new)
		if errors.Is(err, ErrUnsupported) {
			if fmt.Sprint(old.ResourceClaimStatuses) == fmt.Sprint(new.ResourceClaimStatuses) {
				t.Fatalf("case %d: unsupported with only supported fields changed: %v", i, err)
			}
			unsupported++
			continue
		}
		if err != nil {
			t.Fatalf("case %d: %v", i, err)
		}
		oldJSON := mustJSON(t, corev1.Pod{Status: old})
		lib, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, mustJSON(t, corev1.Pod{Status: new}), corev1.Pod{})
		if err != nil {
			t.Fatal(err)
		}
		if (string(ours) == "{}") != (string(lib) == "{}") {
			t.Fatalf("case %d: ours %s, the JSON diff's %s", i, ours, lib)
		}
		if string(ours) == "{}" {
			empty++
			continue
		}
		if !strings.Contains(string(ours), `"conditions":`) && strings.Contains(string(ours), "$setElementOrder/conditions") {
			reorderedOnly++
		}
		want := apply(t, oldJSON, lib)
		got := apply(t, oldJSON, []byte(`{"status":`+string(ours)+`}`))
		if got != want {
			t.Fatalf("case %d: applying our patch\n%s\ngives\n%s\napplying the JSON diff\n%s\ngives\n%s", i, ours, got, lib, want)
		}
	}
	// The cases must exercise every outcome: unsupported ones where Diff
	// leaves the resource claims' statuses to the caller.
	claims := func(name string) *corev1.PodStatus {
		return &corev1.PodStatus{ResourceClaimStatuses: []corev1.PodResourceClaimStatus{{Name: "c", ResourceClaimName: ptr.To(name)}}}
	}
	_, err := Diff(claims("c-1"), claims("c-2"))
	if unsupported == 0 && errors.Is(err, ErrUnsupported) || empty < 500 || reorderedOnly < 100 {
		t.Fatalf("%d unsupported, %d unchanged and %d only reordered cases: the generator misses outcomes", unsupported, empty, reorderedOnly)
	}
}

func apply(t *testing.T, doc, patch []byte) string {
	t.Helper()
	out, err := strategicpatch.StrategicMergePatch(doc, patch, corev1.Pod{})
	if err != nil {
		t.Fatalf("applying %s: %v", patch, err)
	}
	var pod corev1.Pod
	if err := json.Unmarshal(out, &pod); err != nil {
		t.Fatal(err)
	}
	return string(mustJSON(t, pod))
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// BenchmarkStatusPatch compares Diff with the JSON round trip it replaces
// (both statuses marshalled, then CreateTwoWayMergePatch) on the write a
// pod controller makes most: a running pod's status, with the resources a
// v1.36 kubelet reports, as it terminates.
func BenchmarkStatusPatch(b *testing.B) {
	now := metav1.Now()
	requests := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")}
	resources := corev1.ResourceRequirements{Requests: requests, Limits: corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")}}
	running := corev1.PodStatus{
		Phase: corev1.PodRunning, HostIP: "10.0.0.1", HostIPs: []corev1.HostIP{{IP: "10.0.0.1"}},
		PodIP: "10.244.0.1", PodIPs: []corev1.PodIP{{IP: "10.244.0.1"}}, StartTime: &now, QOSClass: corev1.PodQOSBurstable,
		AllocatedResources: requests, Resources: &resources,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodInitialized, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
		ContainerStatuses: []corev1.ContainerStatus{{
			Name: "main", Image: "busybox", ImageID: "mock://busybox", ContainerID: "mock://1/main", Ready: true, Started: ptr.To(true),
			State:              corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
			AllocatedResources: requests, Resources: &resources,
		}},
	}
	done := *running.DeepCopy()
	later := metav1.NewTime(now.Add(time.Minute))
	done.Phase = corev1.PodSucceeded
	done.Conditions[2].Status, done.Conditions[2].LastTransitionTime = corev1.ConditionFalse, later
	done.Conditions[3].Status, done.Conditions[3].LastTransitionTime = corev1.ConditionFalse, later
	done.ContainerStatuses[0].Ready, done.ContainerStatuses[0].Started = false, ptr.To(false)
	done.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: later}}

	b.Run("smpatch", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := Diff(&running, &done); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("json-roundtrip", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			oldJSON, _ := json.Marshal(corev1.Pod{Status: running})
			newJSON, _ := json.Marshal(corev1.Pod{Status: done})
			if _, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}

// TestDiffRefusesWhatItCannotPatch: nil values and non-structs are errors,
// not panics.
func TestDiffRefusesWhatItCannotPatch(t *testing.T) {
	s := corev1.PodStatus{}
	if _, err := Diff(nil, &s); err == nil {
		t.Error("a nil old value gave no error")
	}
	if _, err := Diff(&s, nil); err == nil {
		t.Error("a nil new value gave no error")
	}
	a, b := "a", "b"
	if _, err := Diff(&a, &b); !errors.Is(err, ErrUnsupported) {
		t.Errorf("a string: %v, want ErrUnsupported", err)
	}
}
