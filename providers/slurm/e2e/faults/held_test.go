//go:build e2e

package faults_test

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
)

// TestHeldJobIsReported: a pod whose job Slurm holds stays Pending with
// reason SlurmJobHeld, a message naming the job and its hold, and a
// Warning Event kubectl describe shows; released, it runs.
func TestHeldJobIsReported(t *testing.T) {
	n, _, ns := slurmtest.RunningNode(t)
	// A down partition keeps the job pending, so that an administrator's
	// hold takes before it starts.
	n.Slurm(t, "scontrol", "update", "PartitionName=vk", "State=DOWN")
	pod := n.Create(t, n.Pod(ns, "held", slurmtest.Shell("main", "echo ran; sleep 3600")))
	var id string
	slurmtest.Eventually(t, "the pod's job in squeue", func() (bool, string) {
		out := n.Slurm(t, "squeue", "--noheader", "--states=all", "--format=%i %k")
		for _, line := range strings.Split(out, "\n") {
			if jid, comment, ok := strings.Cut(strings.TrimSpace(line), " "); ok && comment == "vk-pod:"+string(pod.UID) {
				id = jid
				return true, ""
			}
		}
		return false, out
	})
	n.Slurm(t, "scontrol", "hold", id)
	got := n.WaitPod(t, ns, "held", "SlurmJobHeld", func(p *corev1.Pod) bool { return p.Status.Reason == "SlurmJobHeld" })
	if got.Status.Phase != corev1.PodPending || !strings.Contains(got.Status.Message, "job "+id+" (JobHeldAdmin)") ||
		!strings.Contains(got.Status.Message, "scontrol release "+id) {
		t.Errorf("phase %s, message %q; want Pending, naming job %s, its hold and the release", got.Status.Phase, got.Status.Message, id)
	}
	if w := got.Status.ContainerStatuses[0].State.Waiting; w == nil || w.Reason != "SlurmJobHeld" {
		t.Errorf("container state %+v, want waiting SlurmJobHeld", got.Status.ContainerStatuses[0].State)
	}
	slurmtest.Eventually(t, "the hold's Event in kubectl describe", func() (bool, string) {
		out, err := n.C.Kubectl(context.Background(), "-n", ns, "describe", "pod", "held")
		return err == nil && strings.Contains(out, "Warning  SlurmJobHeld") && strings.Contains(out, "Slurm holds job "+id), out
	})

	n.Slurm(t, "scontrol", "release", id)
	n.Slurm(t, "scontrol", "update", "PartitionName=vk", "State=UP")
	got = n.WaitPod(t, ns, "held", "Running once released", daemontest.Running)
	if got.Status.Reason != "" {
		t.Errorf("released and running, reason %q, want none", got.Status.Reason)
	}
}
