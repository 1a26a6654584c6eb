//go:build e2e

package managed_test

import (
	"context"
	"fmt"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/ha"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node"
)

// The sizes: 20 Nodes and 200 pods on them.
const (
	nodeCount = 20
	podCount  = 200
)

// TestKarpenterNodesManaged: Nodes created the way Karpenter's kwok
// provider creates them become Ready, keep what their creator set, run a
// Deployment's 200 pods, and serve their kubelet API, the daemon
// registering nothing; a Node deleted stops being served (no lease
// renewal, no pod run) and is not created again, while the others carry
// on.
func TestKarpenterNodesManaged(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	pool := testcluster.UniqueName("karp")
	names := createKarpenterNodes(t, c, pool, nodeCount)
	// In a node host, where the API server may proxy to: it refuses
	// loopback addresses.
	host := c.AddHost(t, testcluster.UniqueName("h"))
	const base = 10250
	d := daemontest.Start(t, c, host, append(managedFlags(pool), "--listen-port", strconv.Itoa(base), "--nodename", pool+"-vk")...)

	for _, name := range names {
		n := daemontest.WaitNodeReady(t, c.Client, name)
		want := karpenterNode(name, pool)
		if !maps(n.Labels, want.Labels) || n.Annotations[kwokKey] != kwokValue || n.Spec.ProviderID != want.Spec.ProviderID {
			t.Errorf("%s: labels %v annotations %v providerID %q: the creator's must stay as they were", name, n.Labels, n.Annotations, n.Spec.ProviderID)
		}
		if taints := notControlPlanes(n.Spec.Taints); len(taints) != 1 || taints[0].Key != unregisteredTaint {
			t.Errorf("%s: taints %v, want only Karpenter's %s (and the control plane's)", name, n.Spec.Taints, unregisteredTaint)
		}
		if n.Status.Capacity.Cpu().String() != "4" || n.Status.Allocatable.Cpu().String() != "3920m" {
			t.Errorf("%s: capacity %v allocatable %v: the Node's own are the template", name, n.Status.Capacity, n.Status.Allocatable)
		}
		if port := n.Status.DaemonEndpoints.KubeletEndpoint.Port; port < base || port >= base+nodeCount {
			t.Errorf("%s: kubelet endpoint port %d, want one of the daemon's from %d", name, port, base)
		}
		if len(n.Status.Addresses) == 0 || n.Status.Addresses[0].Address != d.Addr {
			t.Errorf("%s: addresses %v, want the daemon's %s (the Node had none)", name, n.Status.Addresses, d.Addr)
		}
		for _, f := range n.ManagedFields {
			if f.Manager == node.FieldManager && f.Subresource != "status" {
				t.Errorf("%s: the daemon owns fields outside the status: %s", name, f.FieldsV1.String())
			}
		}
		register(t, c, name, pool)
	}

	dep := karpenterWorkload(ns, pool, podCount)
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var pods []corev1.Pod
	daemontest.EventuallyWithin(t, 4*time.Minute, fmt.Sprintf("%d pods Running on the managed nodes", podCount), func() (bool, string) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		pods = slices.DeleteFunc(list.Items, func(p corev1.Pod) bool { return !daemontest.Running(&p) || !slices.Contains(names, p.Spec.NodeName) })
		return len(pods) == podCount, fmt.Sprintf("%d Running", len(pods))
	})
	onNode := map[string]int{}
	for _, p := range pods {
		onNode[p.Spec.NodeName]++
	}

	// Each node's kubelet API, through the API server, lists its pods.
	victim := pods[0].Spec.NodeName
	if out := daemontest.Kubectl(t, c, "get", "--raw", "/api/v1/nodes/"+victim+"/proxy/pods"); !strings.Contains(out, `"`+pods[0].Name+`"`) {
		t.Errorf("%s's /pods does not list %s: %.300s", victim, pods[0].Name, out)
	}
	for _, name := range names {
		if p := notControlPlanes(taintsOf(t, c, name)); len(p) != 1 || p[0].Key != poolTaintKey {
			t.Errorf("%s: taints %v after Karpenter's registration, want only its NodePool's (and the control plane's)", name, p)
		}
	}

	// Delete one Node: its serving stops, and only its.
	deletedAt := time.Now()
	if err := c.Client.CoreV1().Nodes().Delete(ctx, victim, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.EventuallyWithin(t, 30*time.Second, victim+": serving stopped", func() (bool, string) {
		stopped := regexp.MustCompile(`msg="stopped serving the managed node: it is gone or no longer matches" node=` + regexp.QuoteMeta(victim) + `( |$)`)
		return stopped.MatchString(d.Output.String()), "not yet"
	})
	stopped := time.Now()
	orphan := daemontest.MockPod("orphan", victim, corev1.RestartPolicyAlways, nil)
	daemontest.CreatePods(t, c.Client, ns, orphan)
	// Longer than a lease renewal interval: the other nodes renew theirs.
	window := time.Duration(float64(node.DefaultLeaseDuration)*node.DefaultRenewIntervalFraction*float64(time.Second)) + 5*time.Second
	for deadline := time.Now().Add(window); time.Now().Before(deadline); time.Sleep(500 * time.Millisecond) {
		if _, err := c.Client.CoreV1().Nodes().Get(ctx, victim, metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("%s: the deleted Node is back (%v): the daemon must not create a Node it did not register", victim, err)
		}
		lease, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, victim, metav1.GetOptions{})
		if err == nil && lease.Spec.RenewTime != nil && lease.Spec.RenewTime.After(stopped) {
			t.Fatalf("%s: its lease was renewed at %s, after serving stopped", victim, lease.Spec.RenewTime)
		}
		p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "orphan", metav1.GetOptions{})
		if err == nil && (p.Status.Phase != corev1.PodPending || len(p.Status.ContainerStatuses) > 0) {
			t.Fatalf("a pod bound to the deleted node was run: phase %s, %d container statuses", p.Status.Phase, len(p.Status.ContainerStatuses))
		}
	}
	for _, name := range names {
		if name == victim {
			continue
		}
		lease, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil || lease.Spec.RenewTime == nil || !lease.Spec.RenewTime.After(deletedAt) {
			t.Errorf("%s: lease not renewed since another Node was deleted (%v)", name, err)
		}
	}
	list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	running := 0
	for _, p := range list.Items {
		if p.Spec.NodeName != victim && onNode[p.Spec.NodeName] > 0 && daemontest.Running(&p) {
			running++
		}
	}
	if want := podCount - onNode[victim]; running < want {
		t.Errorf("%d pods Running on the other nodes, want the %d there before", running, want)
	}
	daemontest.CheckNoPanic(t, d)
}

// TestManagedNodesSpreadOverReplicas: with --leader-elect, a second
// replica takes half of the managed Nodes from the first, and every Node
// stays served by exactly one of them.
func TestManagedNodesSpreadOverReplicas(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	pool := testcluster.UniqueName("karpha")
	names := createKarpenterNodes(t, c, pool, nodeCount)
	flags := append(managedFlags(pool), "--leader-elect", "--leader-elect-resource-namespace", ns, "--nodename", pool+"-vk")
	// Each replica in a host of its own, where the API server may proxy
	// to: a node's InternalIP says which replica serves it.
	a := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("ha")), flags...)
	for _, name := range names {
		daemontest.WaitNodeReady(t, c.Client, name)
	}
	holders := func() map[string][]string {
		out := map[string][]string{}
		for _, name := range names {
			l, err := c.Client.CoordinationV1().Leases(ns).Get(context.Background(), ha.HolderLeaseName(name), metav1.GetOptions{})
			if err == nil && l.Spec.HolderIdentity != nil && *l.Spec.HolderIdentity != "" {
				out[*l.Spec.HolderIdentity] = append(out[*l.Spec.HolderIdentity], name)
			}
		}
		return out
	}
	var first string
	daemontest.Eventually(t, "the first replica holds every node", func() (bool, string) {
		h := holders()
		for id, held := range h {
			first = id
			return len(h) == 1 && len(held) == nodeCount, fmt.Sprint(h)
		}
		return false, "no holder"
	})

	b := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("hb")), flags...)
	var split map[string][]string
	daemontest.EventuallyWithin(t, 2*time.Minute, "the second replica holds half of the nodes", func() (bool, string) {
		split = holders()
		if len(split) != 2 || len(split[first]) == 0 {
			return false, fmt.Sprint(split)
		}
		total := 0
		for _, held := range split {
			total += len(held)
		}
		return total == nodeCount && len(split[first]) == nodeCount/2, fmt.Sprint(split)
	})
	// Each replica serves its half: their InternalIP is its address, and
	// they are Ready.
	for id, held := range split {
		addr := a.Addr
		if id != first {
			addr = b.Addr
		}
		for _, name := range held {
			daemontest.Eventually(t, name+": served by its holder at "+addr, func() (bool, string) {
				n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
				if err != nil {
					return false, err.Error()
				}
				return len(n.Status.Addresses) > 0 && n.Status.Addresses[0].Address == addr && ready(n), fmt.Sprintf("addresses %v ready %v", n.Status.Addresses, ready(n))
			})
		}
	}
	daemontest.CheckNoPanic(t, a)
	daemontest.CheckNoPanic(t, b)
}

// karpenterWorkload is a Deployment as a Karpenter user writes one: it
// selects the NodePool and tolerates its taint, with resource requests.
func karpenterWorkload(ns, pool string, replicas int32) *appsv1.Deployment {
	labels := map[string]string{"app": "inflate"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "inflate", Namespace: ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeSelector:                  map[string]string{nodePoolLabel: pool},
					Tolerations:                   []corev1.Toleration{{Key: poolTaintKey, Operator: corev1.TolerationOpEqual, Value: pool, Effect: corev1.TaintEffectNoSchedule}},
					TerminationGracePeriodSeconds: ptr.To[int64](0),
					Containers: []corev1.Container{{
						Name:  "inflate",
						Image: "public.ecr.aws/eks-distro/kubernetes/pause:3.7",
						Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
							corev1.ResourceCPU:    resource.MustParse("100m"),
							corev1.ResourceMemory: resource.MustParse("64Mi"),
						}},
					}},
				},
			},
		},
	}
}

func taintsOf(t *testing.T, c *testcluster.Cluster, name string) []corev1.Taint {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n.Spec.Taints
}

// notControlPlanes are the taints but the node lifecycle controller's
// (node.kubernetes.io/not-ready until a Node is first seen Ready).
func notControlPlanes(taints []corev1.Taint) []corev1.Taint {
	return slices.DeleteFunc(slices.Clone(taints), func(t corev1.Taint) bool { return strings.HasPrefix(t.Key, "node.kubernetes.io/") })
}

func ready(n *corev1.Node) bool {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue
		}
	}
	return false
}

// maps reports whether got has every entry of want.
func maps(got, want map[string]string) bool {
	for k, v := range want {
		if got[k] != v {
			return false
		}
	}
	return true
}
