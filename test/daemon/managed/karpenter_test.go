//go:build e2e

package managed_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/util/retry"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// What Karpenter's kwok provider puts on the Nodes it creates
// (kwok/cloudprovider in sigs.k8s.io/karpenter): its kwok label and
// annotation, the node pool's label, and the taint every Node of
// Karpenter's carries until Karpenter has registered it.
const (
	kwokKey           = "kwok.x-k8s.io/node"
	kwokValue         = "fake"
	nodePoolLabel     = "karpenter.sh/nodepool"
	unregisteredTaint = "karpenter.sh/unregistered"
	// poolTaintKey is the test's NodePool taint, which Karpenter puts on
	// at registration: it keeps the other tests' pods off these Nodes.
	poolTaintKey = "example.com/team"
)

// karpenterNode is a Node as Karpenter's kwok provider creates it for a
// NodeClaim of pool: labels of the instance type and offering, the kwok
// label and annotation, a provider ID, the unregistered taint, and the
// instance type's capacity, with a Pending phase and no conditions.
func karpenterNode(name, pool string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:              resource.MustParse("4"),
		corev1.ResourceMemory:           resource.MustParse("16Gi"),
		corev1.ResourceEphemeralStorage: resource.MustParse("20Gi"),
		corev1.ResourcePods:             resource.MustParse("110"),
	}
	allocatable := capacity.DeepCopy()
	allocatable[corev1.ResourceCPU] = resource.MustParse("3920m")
	allocatable[corev1.ResourceMemory] = resource.MustParse("15Gi")
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{
			Name: name,
			Labels: map[string]string{
				nodePoolLabel:                       pool,
				"karpenter.sh/capacity-type":        "on-demand",
				corev1.LabelInstanceTypeStable:      "c-4x-amd64-linux",
				"karpenter.kwok.sh/instance-size":   "4x",
				"karpenter.kwok.sh/instance-family": "c",
				"karpenter.kwok.sh/instance-cpu":    "4",
				"karpenter.kwok.sh/instance-memory": "16384",
				corev1.LabelArchStable:              "amd64",
				corev1.LabelOSStable:                "linux",
				corev1.LabelTopologyZone:            "test-zone-a",
				corev1.LabelHostname:                name,
				"eks-node-viewer/instance-price":    "0.173000",
				"kwok-partition":                    "partition-a",
				kwokKey:                             kwokValue,
			},
			Annotations: map[string]string{kwokKey: kwokValue},
		},
		Spec: corev1.NodeSpec{
			ProviderID: "kwok://" + name,
			Taints:     []corev1.Taint{{Key: unregisteredTaint, Effect: corev1.TaintEffectNoExecute}},
		},
		Status: corev1.NodeStatus{Capacity: capacity, Allocatable: allocatable, Phase: corev1.NodePending},
	}
}

// createKarpenterNodes creates count Nodes of pool, deleted when the test
// ends (after the daemons that serve them stop: cleanups run last first).
func createKarpenterNodes(t *testing.T, c *testcluster.Cluster, pool string, count int) []string {
	t.Helper()
	ctx := context.Background()
	names := make([]string, count)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", pool, i)
	}
	t.Cleanup(func() {
		for _, n := range names {
			_ = c.Client.CoreV1().Nodes().Delete(context.Background(), n, daemontest.DeleteNow)
		}
	})
	for _, n := range names {
		if _, err := c.Client.CoreV1().Nodes().Create(ctx, karpenterNode(n, pool), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	return names
}

// register does what Karpenter does once a Node of its own has come up:
// the unregistered taint goes, the NodePool's taints come.
func register(t *testing.T, c *testcluster.Cluster, name, pool string) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		var taints []corev1.Taint
		for _, taint := range n.Spec.Taints {
			if taint.Key != unregisteredTaint {
				taints = append(taints, taint)
			}
		}
		n.Spec.Taints = append(taints, corev1.Taint{Key: poolTaintKey, Value: pool, Effect: corev1.TaintEffectNoSchedule})
		_, err = c.Client.CoreV1().Nodes().Update(context.Background(), n, metav1.UpdateOptions{FieldManager: "karpenter"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// managedFlags select the Nodes of pool as kwok is told to under
// Karpenter (the annotation), narrowed to the test's node pool.
func managedFlags(pool string) []string {
	return []string{"--manage-nodes-with-annotation-selector", kwokKey + "=" + kwokValue, "--manage-nodes-with-label-selector", nodePoolLabel + "=" + pool}
}
