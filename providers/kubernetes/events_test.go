package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// created is when B made the pods of these tests.
var created = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// eventsProvider is a test provider whose A has the restricted pod
// team/web (uid-1) and whose B has the pod this node made of it, UID
// b-uid-1, made at created.
func eventsProvider(t *testing.T) (*Provider, cache.Indexer, *corev1.Pod) {
	t.Helper()
	p, _, localPods := objectsProvider(t, Config{})
	web := restrictedPod()
	web.Spec.InitContainers = []corev1.Container{{Name: "setup", Image: "busybox"}}
	remote := madeInB(t, p, localPods, web)
	remote.UID, remote.CreationTimestamp = "b-uid-1", metav1.NewTime(created)
	return p, localPods, remote
}

// eventAbout is an Event of B of reason about the container app of
// remote, last seen a second after remote was made.
func eventAbout(remote *corev1.Pod, eventType, reason, message string) *corev1.Event {
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: remote.Namespace, Name: remote.Name + ".1"},
		InvolvedObject: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: remote.Namespace, Name: remote.Name, UID: remote.UID,
			FieldPath: "spec.containers{app}"},
		Type: eventType, Reason: reason, Message: message,
		FirstTimestamp: metav1.NewTime(created.Add(time.Second)), LastTimestamp: metav1.NewTime(created.Add(time.Second)),
	}
}

// TestRelayableMapsOnlyThisNodesPods: an Event of B goes to A's pod only
// when it names, by UID, a pod this node made in B whose pod in A is still
// there, with its type, reason, message and container; every other Event
// (about another object, a pod of B's users, a forged UID, an older pod,
// an echo of A's own) is ignored.
func TestRelayableMapsOnlyThisNodesPods(t *testing.T) {
	p, localPods, remote := eventsProvider(t)
	web, _, _ := localPods.GetByKey("team/web")
	want := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: web.(*corev1.Pod).UID, FieldPath: "spec.containers{app}"}

	// Pods of B that are not this node's: one of B's users', and one with
	// this node's back-links and signature copied under another name.
	theirs := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: remote.Namespace, Name: "theirs", UID: "b-uid-theirs", CreationTimestamp: remote.CreationTimestamp}}
	forged := remote.DeepCopy()
	forged.Name, forged.UID = "forged", "b-uid-forged"
	// A pod this node made for an A pod that is gone.
	gone := restrictedPod()
	gone.Name, gone.UID = "gone", "uid-gone"
	goneInB := madeInB(t, p, localPods, gone)
	goneInB.UID, goneInB.CreationTimestamp = "b-uid-gone", remote.CreationTimestamp
	for _, pod := range []*corev1.Pod{remote, theirs, forged, goneInB} {
		if err := p.pods.GetStore().Update(pod); err != nil {
			t.Fatal(err)
		}
	}
	if err := localPods.Delete(gone); err != nil {
		t.Fatal(err)
	}

	for _, tt := range []struct {
		name    string
		change  func(*corev1.Event)
		verdict eventVerdict
		ref     corev1.ObjectReference
		message string
	}{
		{name: "a container's Warning", change: func(*corev1.Event) {}, verdict: eventRelayed, ref: want, message: "Error: image missing"},
		{name: "about the pod", change: func(e *corev1.Event) { e.InvolvedObject.FieldPath = "" }, verdict: eventRelayed,
			ref: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: want.UID}, message: "Error: image missing"},
		{name: "an init container's", change: func(e *corev1.Event) { e.InvolvedObject.FieldPath = "spec.initContainers{setup}" }, verdict: eventRelayed,
			ref: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: want.UID, FieldPath: "spec.initContainers{setup}"}, message: "Error: image missing"},
		{name: "a container A's pod does not have: on the pod", change: func(e *corev1.Event) { e.InvolvedObject.FieldPath = "spec.containers{nope}" }, verdict: eventRelayed,
			ref: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: want.UID}, message: "Error: image missing"},
		{name: "a field path of B's writer's: on the pod", change: func(e *corev1.Event) { e.InvolvedObject.FieldPath = "metadata.annotations{x}" }, verdict: eventRelayed,
			ref: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: "team", Name: "web", UID: want.UID}, message: "Error: image missing"},
		{name: "recorded through events.k8s.io", change: func(e *corev1.Event) {
			e.FirstTimestamp, e.LastTimestamp = metav1.Time{}, metav1.Time{}
			e.EventTime = metav1.NewMicroTime(created.Add(time.Second))
		}, verdict: eventRelayed, ref: want, message: "Error: image missing"},
		{name: "forged: our pod's name with another UID", change: func(e *corev1.Event) { e.InvolvedObject.UID = "b-uid-other" }, verdict: eventUIDMismatch},
		{name: "forged: our pod's name with A's UID", change: func(e *corev1.Event) { e.InvolvedObject.UID = want.UID }, verdict: eventUIDMismatch},
		{name: "forged: no UID", change: func(e *corev1.Event) { e.InvolvedObject.UID = "" }, verdict: eventNotAboutPod},
		{name: "a pod of B's users", change: func(e *corev1.Event) { e.InvolvedObject.Name, e.InvolvedObject.UID = "theirs", "b-uid-theirs" }, verdict: eventNotOurs},
		{name: "a pod with our signature under another name", change: func(e *corev1.Event) { e.InvolvedObject.Name, e.InvolvedObject.UID = "forged", "b-uid-forged" }, verdict: eventNotOurs},
		{name: "a name of ours B's informer does not show", change: func(e *corev1.Event) { e.InvolvedObject.Name += "x" }, verdict: eventPodNotYet},
		{name: "another node's name", change: func(e *corev1.Event) { e.InvolvedObject.Name = "a.vk-c.team.web" }, verdict: eventNotOurs},
		{name: "A's pod is gone", change: func(e *corev1.Event) { e.InvolvedObject.Name, e.InvolvedObject.UID = goneInB.Name, goneInB.UID }, verdict: eventSourceGone},
		{name: "a ConfigMap", change: func(e *corev1.Event) { e.InvolvedObject.Kind = "ConfigMap" }, verdict: eventNotAboutPod},
		{name: "a Pod of another API group", change: func(e *corev1.Event) { e.InvolvedObject.APIVersion = "example.com/v1" }, verdict: eventNotAboutPod},
		{name: "recorded in another namespace", change: func(e *corev1.Event) { e.Namespace = "elsewhere" }, verdict: eventNotAboutPod},
		{name: "before B's pod was made", change: func(e *corev1.Event) { e.LastTimestamp = metav1.NewTime(created.Add(-time.Minute)) }, verdict: eventStale},
		{name: "Scheduled, which A's scheduler records", change: func(e *corev1.Event) { e.Reason = "Scheduled" }, verdict: eventEcho},
		{name: "a type of B's writer's", change: func(e *corev1.Event) { e.Type = "Critical" }, verdict: eventInvalid},
		{name: "no reason", change: func(e *corev1.Event) { e.Reason = "" }, verdict: eventInvalid},
	} {
		t.Run(tt.name, func(t *testing.T) {
			ev := eventAbout(remote, corev1.EventTypeWarning, "Failed", "Error: image missing")
			tt.change(ev)
			got, verdict := p.relayable(trimEvent(ev))
			if verdict != tt.verdict {
				t.Fatalf("verdict %v, want %v", verdict, tt.verdict)
			}
			if verdict != eventRelayed {
				return
			}
			if got.ref != tt.ref || got.eventType != corev1.EventTypeWarning || got.reason != "Failed" || got.message != tt.message {
				t.Errorf("relayed %+v, want Warning Failed %q on %+v", got, tt.message, tt.ref)
			}
		})
	}
}

// TestRelayedStringsAreBounded: what B's writer puts in an Event reaches
// A cut (reason, message) and without control characters, which kubectl
// describe would print to A's users' terminals; a message keeps its lines.
func TestRelayedStringsAreBounded(t *testing.T) {
	p, _, remote := eventsProvider(t)
	ev := eventAbout(remote, corev1.EventTypeWarning, strings.Repeat("R", 4000), "line one\n\x1b]0;owned\x07\x1b[2J"+strings.Repeat("é", 4000))
	got, verdict := p.relayable(trimEvent(ev))
	if verdict != eventRelayed {
		t.Fatalf("verdict %v", verdict)
	}
	if len(got.reason) > maxEventReason || !strings.HasSuffix(got.reason, "...") {
		t.Errorf("reason of %d bytes, want at most %d, marked cut", len(got.reason), maxEventReason)
	}
	if len(got.message) > maxEventMessage || !strings.HasSuffix(got.message, "...") || !utf8.ValidString(got.message) ||
		strings.ContainsAny(got.message, "\x1b\x07") || !strings.HasPrefix(got.message, "line one\n ]0;owned  [2J") {
		t.Errorf("message of %d bytes %q, want at most %d, valid, no control characters but its newline, marked cut", len(got.message), got.message, maxEventMessage)
	}
	ev = eventAbout(remote, corev1.EventTypeNormal, "Pulled", string([]byte{0xff, 'o', 'k'}))
	if got, _ := p.relayable(trimEvent(ev)); got.message != "\uFFFDok" {
		t.Errorf("invalid UTF-8 relayed as %q", got.message)
	}
}

// relayTo is an eventRelay of p whose recorder writes to a fake cluster A,
// through the correlator as in the daemon.
func relayTo(t *testing.T, p *Provider) (*eventRelay, *fake.Clientset) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	a := fake.NewClientset()
	r := newEventRelay(p, podEventRecorder(ctx, a, "vk-b"))
	t.Cleanup(r.queue.ShutDown)
	go r.work(ctx)
	return r, a
}

// eventsInA lists A's Events on the pod team/web as "type reason message
// xcount fieldPath".
func eventsInA(t *testing.T, a *fake.Clientset) []string {
	t.Helper()
	list, err := a.CoreV1().Events("team").List(context.Background(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	for _, e := range list.Items {
		if e.InvolvedObject.Name != "web" || e.InvolvedObject.UID != "uid-1" || e.Source.Component != "virtual-kubelet" || e.Source.Host != "vk-b" {
			t.Errorf("an Event in A on %+v from %+v", e.InvolvedObject, e.Source)
		}
		out = append(out, fmt.Sprintf("%s %s %s x%d %s", e.Type, e.Reason, e.Message, e.Count, e.InvolvedObject.FieldPath))
	}
	return out
}

// TestEventRelayRecordsInA: a relayed Event is written in A on A's pod,
// de-duplicated by the correlator: the same Event again counts up, as the
// kubelet's do.
func TestEventRelayRecordsInA(t *testing.T) {
	p, _, remote := eventsProvider(t)
	r, a := relayTo(t, p)
	for range 2 {
		r.queue.Add(trimEvent(eventAbout(remote, corev1.EventTypeWarning, "Failed", "Error: image missing")))
	}
	poll.Until(t, 10*time.Second, "the Event in A, counted twice", func() (bool, string) {
		got := eventsInA(t, a)
		return len(got) == 1 && got[0] == "Warning Failed Error: image missing x2 spec.containers{app}", fmt.Sprint(got)
	})
}

// TestEventRelayBoundsTheNodesRate: past the node's burst, B's Events are
// dropped until the rate allows more, however many B records.
func TestEventRelayBoundsTheNodesRate(t *testing.T) {
	p, _, remote := eventsProvider(t)
	p.cfg.Events = EventsConfig{QPS: 0.001, Burst: 3}
	recorder := record.NewFakeRecorder(10)
	r := newEventRelay(p, recorder)
	defer r.queue.ShutDown()
	for i := range 5 {
		r.handle(context.Background(), trimEvent(eventAbout(remote, corev1.EventTypeNormal, "Pulled", fmt.Sprintf("pulled %d", i))))
	}
	close(recorder.Events)
	var got []string
	for e := range recorder.Events {
		got = append(got, e)
	}
	if want := []string{"Normal Pulled pulled 0", "Normal Pulled pulled 1", "Normal Pulled pulled 2"}; !slices.Equal(got, want) {
		t.Errorf("recorded %q, want the burst of 3: %q", got, want)
	}
}

// TestEventRelayWaitsForThePod: an Event naming this node's pod that B's
// pod informer does not show yet is looked at again, and relayed once the
// pod is there; a forged one naming a pod that never comes is given up
// after eventRetries.
func TestEventRelayWaitsForThePod(t *testing.T) {
	t.Parallel() // the forged Event's retries take 6 s
	p, _, remote := eventsProvider(t)
	if err := p.pods.GetStore().Delete(remote); err != nil {
		t.Fatal(err)
	}
	r, a := relayTo(t, p)
	r.queue.Add(trimEvent(eventAbout(remote, corev1.EventTypeWarning, "Failed", "Error: image missing")))
	never := eventAbout(remote, corev1.EventTypeWarning, "Failed", "never")
	never.InvolvedObject.Name, never.InvolvedObject.UID = remote.Name+"-never", types.UID("b-uid-never")
	never = trimEvent(never)
	r.queue.Add(never)
	poll.Until(t, 10*time.Second, "a retry", func() (bool, string) {
		n := r.queue.NumRequeues(never)
		return n > 0, fmt.Sprint(n, " requeues")
	})
	if err := p.pods.GetStore().Add(remote); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, 10*time.Second, "the Event in A", func() (bool, string) {
		got := eventsInA(t, a)
		return len(got) == 1 && got[0] == "Warning Failed Error: image missing x1 spec.containers{app}", fmt.Sprint(got)
	})
	poll.Until(t, 4*eventRetryDelay<<eventRetries, "the forged Event's last retry", func() (bool, string) {
		n := r.queue.NumRequeues(never)
		return n == eventRetries, fmt.Sprint(n, " requeues")
	})
	poll.Until(t, 4*eventRetryDelay<<eventRetries, "the forged Event given up", func() (bool, string) {
		n := r.queue.NumRequeues(never)
		return n == 0, fmt.Sprint(n, " requeues")
	})
	if got := eventsInA(t, a); len(got) != 1 {
		t.Errorf("Events in A: %q, want the one of the pod that came", got)
	}
}
