//go:build !vk_strategicpatch

package smpatch_test

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/internal/smpatch"
)

// A pod that finished: its phase and its Ready condition change, and the
// patch carries only those, with the conditions' order.
func ExampleDiff() {
	running := corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.0.7", Conditions: []corev1.PodCondition{
		{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
		{Type: corev1.PodReady, Status: corev1.ConditionTrue},
	}}
	done := *running.DeepCopy()
	done.Phase = corev1.PodSucceeded
	done.Conditions[1].Status = corev1.ConditionFalse
	patch, err := smpatch.Diff(&running, &done)
	fmt.Println(string(patch), err)
	// Output:
	// {"phase":"Succeeded","$setElementOrder/conditions":[{"type":"PodScheduled"},{"type":"Ready"}],"conditions":[{"type":"Ready","status":"False"}]} <nil>
}
