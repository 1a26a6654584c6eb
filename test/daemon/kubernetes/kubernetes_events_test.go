//go:build e2e

package kubernetes_test

import (
	"context"
	"fmt"
	"regexp"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestKubernetesProviderEventsBack: a pod whose container fails to start
// in B (the mock's fail-start, as an image that cannot be pulled) shows
// B's Warning in A's kubectl describe, on its container. A writer in B
// (B's admin here, the strongest one) can add Events to the pods this node
// offloaded, by their UID in B, and nothing else: Events it writes naming
// an offloaded pod with another UID, or a pod of B's own, do not reach A.
func TestKubernetesProviderEventsBack(t *testing.T) {
	tc := startTwoClusters(t)
	ctx := context.Background()

	const failure = "pulling registry.example/app:1: not found"
	pod := tc.pod("cannot-start", corev1.Container{Name: "app", Image: "registry.example/app:1"})
	pod.Spec.RestartPolicy = corev1.RestartPolicyNever
	pod.Annotations = map[string]string{mock.AnnotationFailStart: failure}
	tc.create(t, pod)
	failed := daemontest.WaitPod(t, tc.a.Client, tc.ns, pod.Name, "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })

	// eventsInA lists A's Events about the pod, by its UID in A.
	eventsInA := func(t *testing.T) []corev1.Event {
		t.Helper()
		list, err := tc.a.Client.CoreV1().Events(tc.ns).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(failed.UID)).String(),
		})
		if err != nil {
			t.Fatal(err)
		}
		return list.Items
	}
	find := func(events []corev1.Event, reason string) *corev1.Event {
		for i := range events {
			if events[i].Reason == reason {
				return &events[i]
			}
		}
		return nil
	}

	t.Run("B's Warning shows in A's kubectl describe", func(t *testing.T) {
		daemontest.Eventually(t, "B's Warning Failed on the pod in A", func() (bool, string) {
			events := eventsInA(t)
			return find(events, mock.ReasonFailed) != nil, fmt.Sprint(len(events), " Events")
		})
		e := find(eventsInA(t), mock.ReasonFailed)
		if e.Type != corev1.EventTypeWarning || e.Message != "Error: "+failure || e.InvolvedObject.FieldPath != "spec.containers{app}" ||
			e.InvolvedObject.Name != pod.Name || e.Source.Component != "virtual-kubelet" || e.Source.Host != tc.node.Name {
			t.Errorf("the Event in A: %s %s %q on %+v from %+v", e.Type, e.Reason, e.Message, e.InvolvedObject, e.Source)
		}
		out, err := tc.kubectl("", "describe", "pod", pod.Name)
		if err != nil {
			t.Fatalf("kubectl describe pod: %v\n%s", err, out)
		}
		if !regexp.MustCompile(`(?m)^\s+Warning\s+Failed\s+.*\s` + regexp.QuoteMeta("Error: "+failure) + `$`).MatchString(out) {
			t.Errorf("kubectl describe pod %s shows no Warning Failed %q:\n%s", pod.Name, "Error: "+failure, out)
		}
		// B's scheduler's Scheduled, naming B's node, does not cross: A's
		// scheduler records the binding to the virtual node.
		remote := tc.remotePods(t)[pod.Name]
		if len(remote) != 1 {
			t.Fatalf("%d pods in B for %s", len(remote), pod.Name)
		}
		inB, err := tc.b.Client.CoreV1().Events(tc.remoteNS).List(ctx, metav1.ListOptions{
			FieldSelector: fields.OneTermEqualSelector("involvedObject.uid", string(remote[0].UID)).String(),
		})
		if err != nil || find(inB.Items, "Scheduled") == nil {
			t.Fatalf("B's Scheduled Event about %s: %v, %d Events", remote[0].Name, err, len(inB.Items))
		}
		if e := find(eventsInA(t), "Scheduled"); e != nil {
			t.Errorf("B's Scheduled Event in A: %q from %+v", e.Message, e.Source)
		}
	})

	t.Run("a writer in B reaches only the offloaded pods, by their UID", func(t *testing.T) {
		remote := tc.remotePods(t)[pod.Name]
		if len(remote) != 1 {
			t.Fatalf("%d pods in B for %s", len(remote), pod.Name)
		}
		now := metav1.NewTime(time.Now())
		write := func(reason string, about corev1.ObjectReference) {
			t.Helper()
			ev := &corev1.Event{
				ObjectMeta:     metav1.ObjectMeta{Name: testcluster.UniqueName("written-in-b")},
				InvolvedObject: about, Type: corev1.EventTypeWarning, Reason: reason, Message: "written by a writer in B",
				FirstTimestamp: now, LastTimestamp: now, Count: 1, Source: corev1.EventSource{Component: "writer-in-b"},
			}
			if _, err := tc.b.Client.CoreV1().Events(tc.remoteNS).Create(ctx, ev, metav1.CreateOptions{}); err != nil {
				t.Fatal(err)
			}
		}
		ours := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: tc.remoteNS, Name: remote[0].Name, UID: remote[0].UID}
		forgedUID := ours
		forgedUID.UID = types.UID("a-uid-of-the-writers")
		asA := ours
		asA.UID = failed.UID // A's UID, which a writer in B may learn from the back-links
		bystander := corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: tc.remoteNS, Name: "bystander", UID: types.UID("uid-of-bs-own-pod")}
		write("ForgedUID", forgedUID)
		write("ForgedAsA", asA)
		write("NotOffloaded", bystander)
		// Written last, through the same watch: once it is in A, the
		// others have been looked at.
		write("WrittenInB", ours)

		daemontest.Eventually(t, "the Event written in B about the offloaded pod, by its UID, in A", func() (bool, string) {
			events := eventsInA(t)
			return find(events, "WrittenInB") != nil, fmt.Sprint(len(events), " Events")
		})
		all, err := tc.a.Client.CoreV1().Events("").List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range all.Items {
			switch e.Reason {
			case "ForgedUID", "ForgedAsA", "NotOffloaded":
				t.Errorf("a forged Event of B's writer reached A: %s/%s %s on %+v", e.Namespace, e.Name, e.Reason, e.InvolvedObject)
			}
		}
	})
}
