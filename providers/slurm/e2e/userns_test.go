//go:build e2e

package e2e_test

import (
	"context"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
)

// TestHostUsersRunsInAUserNamespace: the slurm node declares user
// namespaces in status.runtimeHandlers[].features, and a pod with hostUsers:
// false runs: its job's container sees a user namespace of its own (its
// uid_map is not the initial namespace's identity map of all 2^32 IDs).
func TestHostUsersRunsInAUserNamespace(t *testing.T) {
	n, _, ns := slurmtest.RunningNode(t)
	node, err := n.C.Client.CoreV1().Nodes().Get(context.Background(), n.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, ok := daemontest.UserNamespaces(node); !ok || !got {
		t.Errorf("runtimeHandlers %+v, want userNamespaces true", node.Status.RuntimeHandlers)
	}

	pod := n.Pod(ns, "userns", slurmtest.Shell("main", "cat /proc/self/uid_map; while :; do sleep 1; done"))
	pod.Spec.HostUsers = ptr.To(false)
	n.Create(t, pod)
	n.WaitPod(t, ns, "userns", "Running", daemontest.Running)
	slurmtest.Eventually(t, "the container's uid_map in its log", func() (bool, string) {
		out, err := n.C.Kubectl(context.Background(), "-n", ns, "logs", "userns")
		fields := strings.Fields(out)
		return err == nil && len(fields) == 3 && fields[2] != "4294967295", out
	})
}
