package mock

import (
	"context"
	"fmt"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/provider"
)

// refRecorder keeps the Events recorded with the reference they were
// recorded on, container fieldPath included.
type refRecorder struct {
	mu     sync.Mutex
	events []recordedEvent
}

type recordedEvent struct {
	ref                        *corev1.ObjectReference
	eventType, reason, message string
}

var _ record.EventRecorder = (*refRecorder)(nil)

func (r *refRecorder) Event(obj runtime.Object, eventType, reason, message string) {
	r.mu.Lock()
	defer r.mu.Unlock()
	ref, _ := obj.(*corev1.ObjectReference)
	r.events = append(r.events, recordedEvent{ref: ref, eventType: eventType, reason: reason, message: message})
}

func (r *refRecorder) Eventf(obj runtime.Object, eventType, reason, format string, args ...any) {
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

func (r *refRecorder) AnnotatedEventf(obj runtime.Object, _ map[string]string, eventType, reason, format string, args ...any) {
	r.Event(obj, eventType, reason, fmt.Sprintf(format, args...))
}

// TestFailStartRecordsFailed: a container scripted to fail its start gets
// the kubelet's Warning Failed "Error: <message>" on its fieldPath, an init
// container's under spec.initContainers.
func TestFailStartRecordsFailed(t *testing.T) {
	events := &refRecorder{}
	p, err := New(context.Background(), provider.InitConfig{NodeName: "vk0", OperatingSystem: "linux", EventRecorder: events})
	if err != nil {
		t.Fatal(err)
	}
	p.(*Provider).NotifyPods(context.Background(), (&recorder{}).record)
	broken := testPod("broken", map[string]string{AnnotationFailStart: "image missing"}, corev1.RestartPolicyNever)
	initBroken := testPod("init-broken", map[string]string{AnnotationFailStart + ".setup": ""}, corev1.RestartPolicyNever)
	initBroken.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
	for _, pod := range []*corev1.Pod{broken, initBroken} {
		if err := p.CreatePod(context.Background(), pod); err != nil {
			t.Fatal(err)
		}
	}
	want := []struct{ name, uid, fieldPath, message string }{
		{"broken", "uid-broken", "spec.containers{app}", "Error: image missing"},
		{"init-broken", "uid-init-broken", "spec.initContainers{setup}", "Error: scripted start failure"},
	}
	events.mu.Lock()
	defer events.mu.Unlock()
	if len(events.events) != len(want) {
		t.Fatalf("%d Events, want %d: %+v", len(events.events), len(want), events.events)
	}
	for i, w := range want {
		e := events.events[i]
		if e.ref == nil || e.ref.Kind != "Pod" || e.ref.Namespace != "ns" || e.ref.Name != w.name || string(e.ref.UID) != w.uid || e.ref.FieldPath != w.fieldPath ||
			e.eventType != corev1.EventTypeWarning || e.reason != ReasonFailed || e.message != w.message {
			t.Errorf("Event %d: %+v on %+v, want Warning %s %q on %s", i, e, e.ref, ReasonFailed, w.message, w.fieldPath)
		}
	}
}
