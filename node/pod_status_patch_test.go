//go:build e2e

package node

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// TestStatusPatchAgainstTheAPIServer writes a pod's statuses as the
// controller does, through statusPatch, and reads back what the API server
// stored: a condition's reason cleared, a container terminated, a pod IP
// removed. A patch made for a pod that was deleted and created again under
// the same name is refused.
func TestStatusPatchAgainstTheAPIServer(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	pods := c.Client.CoreV1().Pods(ns)
	create := func() *corev1.Pod {
		t.Helper()
		p, err := pods.Create(ctx, &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Spec:       corev1.PodSpec{NodeName: "no-such-node", Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	write := func(uid types.UID, from *corev1.PodStatus, to corev1.PodStatus) (*corev1.Pod, error) {
		t.Helper()
		patch, err := statusPatch(uid, from, &to)
		if err != nil || patch == nil {
			t.Fatalf("patch from %+v to %+v: %s, %v", from, to, patch, err)
		}
		return pods.Patch(ctx, "p", types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	}
	now := metav1.NewTime(time.Now().Add(-time.Minute))
	pod := create()

	running := *pod.Status.DeepCopy()
	running.Phase, running.StartTime = corev1.PodRunning, &now
	running.PodIP, running.PodIPs = "10.244.0.7", []corev1.PodIP{{IP: "10.244.0.7"}, {IP: "fd00::7"}}
	running.Conditions = append(running.Conditions,
		corev1.PodCondition{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now, Reason: "Started"},
		corev1.PodCondition{Type: corev1.ContainersReady, Status: corev1.ConditionTrue, LastTransitionTime: now})
	running.ContainerStatuses = []corev1.ContainerStatus{{
		Name: "main", Image: "busybox", ImageID: "mock://busybox", ContainerID: "mock://p/main", Ready: true, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
	}}
	stored, err := write(pod.UID, &pod.Status, running)
	if err != nil {
		t.Fatal(err)
	}
	if !statusEqual(&stored.Status, &running) {
		t.Fatalf("stored %+v, wrote %+v", stored.Status, running)
	}

	done := *stored.Status.DeepCopy()
	done.Phase = corev1.PodSucceeded
	done.PodIPs = done.PodIPs[:1]
	for i := range done.Conditions {
		if done.Conditions[i].Type == corev1.PodReady {
			done.Conditions[i].Status, done.Conditions[i].Reason = corev1.ConditionFalse, ""
		}
	}
	done.ContainerStatuses[0].Ready, done.ContainerStatuses[0].Started = false, ptr.To(false)
	done.ContainerStatuses[0].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{Reason: "Completed", StartedAt: now, FinishedAt: metav1.Now()}}
	stored, err = write(pod.UID, &stored.Status, done)
	if err != nil {
		t.Fatal(err)
	}
	if !statusEqual(&stored.Status, &done) {
		t.Fatalf("stored %+v, wrote %+v", stored.Status, done)
	}

	if err := pods.Delete(ctx, "p", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	again := create()
	if _, err := write(pod.UID, &again.Status, running); !apierrors.IsInvalid(err) {
		t.Fatalf("a patch for the old pod on the new one: got %v, want the UID refused as immutable", err)
	}
	if cur, err := pods.Get(ctx, "p", metav1.GetOptions{}); err != nil || cur.Status.Phase != corev1.PodPending {
		t.Fatalf("the new pod after the refused patch: %v, %v", cur.Status.Phase, err)
	}
}
