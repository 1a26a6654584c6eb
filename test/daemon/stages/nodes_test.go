//go:build e2e

package stages_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// TestNodeStagesOfManyNodes: the nodes of one process follow their Nodes
// for their stages through the process's one watch of them: the node
// labelled for it turns NotReady and the other stays Ready
// (TestNodeStagesFollowTheProcessWatch shows no watch of its own is
// opened).
func TestNodeStagesOfManyNodes(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	d := daemontest.Start(t, c, nil, append(stageFlags(t, "node-chaos.yaml"), "--node-count", "2")...)
	names := []string{d.Name + "-0", d.Name + "-1"}
	for _, name := range names {
		daemontest.WaitNodeReady(t, c.Client, name)
	}
	patch := `{"metadata":{"labels":{"node-not-ready.stage.kwok.x-k8s.io":"true"},"annotations":{"node-not-ready.stage.kwok.x-k8s.io/reason":"DiskOnFire"}}}`
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, names[1], types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	ready := func(name string) (corev1.ConditionStatus, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return "", err.Error()
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeReady {
				return cond.Status, cond.Reason
			}
		}
		return "", "no Ready condition"
	}
	eventually(t, "the labelled node NotReady", func() (bool, string) {
		status, reason := ready(names[1])
		return status == corev1.ConditionFalse && reason == "DiskOnFire", fmt.Sprintf("Ready %s (%s)", status, reason)
	})
	if status, reason := ready(names[0]); status != corev1.ConditionTrue {
		t.Errorf("the other node: Ready %s (%s), want True", status, reason)
	}
}
