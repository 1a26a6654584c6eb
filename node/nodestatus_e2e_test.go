//go:build e2e

package node_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/util/retry"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

const gpu corev1.ResourceName = "nvidia.com/gpu"

var (
	providerTaint = corev1.Taint{Key: "virtual-kubelet.io/provider", Value: "test", Effect: corev1.TaintEffectNoSchedule}
	gpuTaint      = corev1.Taint{Key: "vk.test/gpu", Value: "true", Effect: corev1.TaintEffectNoSchedule}
	userTaint     = corev1.Taint{Key: "user.test/dedicated", Value: "ops", Effect: corev1.TaintEffectNoSchedule}
)

// gpuNode is nodeSpec with what the provider later takes away: a GPU, a
// condition about it, a label, an annotation and a taint.
func gpuNode(name string) *corev1.Node {
	n := nodeSpec(name)
	n.Labels["vk.test/accelerator"] = "gpu"
	n.Annotations = map[string]string{"vk.test/driver": "535", "vk.test/keep": "yes"}
	n.Spec.Taints = []corev1.Taint{providerTaint, gpuTaint}
	n.Status.Capacity = n.Status.Capacity.DeepCopy()
	n.Status.Capacity[gpu] = resource.MustParse("2")
	n.Status.Allocatable = n.Status.Capacity.DeepCopy()
	n.Status.Conditions = append(n.Status.Conditions, corev1.NodeCondition{
		Type: "vk.test/GPUHealthy", Status: corev1.ConditionTrue, Reason: "DriverLoaded", Message: "2 GPUs",
	})
	return n
}

// withoutGPU is what the provider reports once the GPU is gone: capacity,
// condition and annotation removed, label changed, GPU taint dropped.
func withoutGPU(name string) *corev1.Node {
	n := nodeSpec(name)
	n.Labels["vk.test/accelerator"] = "none"
	n.Annotations = map[string]string{"vk.test/keep": "yes"}
	return n
}

func startNodeWith(t *testing.T, c *testcluster.Cluster, spec func(name string) *corev1.Node) (*node.NaiveNodeProviderV2, string) {
	t.Helper()
	np := node.NewNaiveNodeProvider()
	_, name := startNode(t, c, notifyingProvider{newTestProvider()}, func(cfg *nodeutil.Config) {
		cfg.NodeProvider = np
		cfg.Node = spec(cfg.Node.Name)
	})
	return np, name
}

func getNode(t *testing.T, c *testcluster.Cluster, name string) *corev1.Node {
	t.Helper()
	n, err := c.Client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func hasTaint(n *corev1.Node, want corev1.Taint) bool {
	return slices.ContainsFunc(n.Spec.Taints, func(t corev1.Taint) bool {
		return t.Key == want.Key && t.Effect == want.Effect && t.Value == want.Value
	})
}

func conditionTypes(n *corev1.Node) []string {
	var out []string
	for _, c := range n.Status.Conditions {
		out = append(out, string(c.Type))
	}
	slices.Sort(out)
	return out
}

// nodeProblems lists how n differs from what the provider (withoutGPU) and
// the other client (cordon, label, taint, condition) made it.
func nodeProblems(n *corev1.Node) []string {
	var problems []string
	wantLabels := maps.Clone(withoutGPU(n.Name).Labels)
	wantLabels["user.test/team"] = "ops"
	if !maps.Equal(n.Labels, wantLabels) {
		problems = append(problems, fmt.Sprintf("labels %v, want %v", n.Labels, wantLabels))
	}
	if _, ok := n.Annotations["vk.test/driver"]; ok || n.Annotations["vk.test/keep"] != "yes" || n.Annotations["user.test/note"] != "mine" {
		problems = append(problems, fmt.Sprintf("annotations %v", n.Annotations))
	}
	want := withoutGPU(n.Name).Status.Capacity
	for _, got := range []corev1.ResourceList{n.Status.Capacity, n.Status.Allocatable} {
		if !slices.Equal(slices.Sorted(maps.Keys(got)), slices.Sorted(maps.Keys(want))) {
			problems = append(problems, fmt.Sprintf("capacity/allocatable %v, want the keys of %v", got, want))
		}
	}
	// Ready is ours; ExternalCheck is the other client's.
	if got := conditionTypes(n); !slices.Equal(got, []string{"ExternalCheck", "Ready"}) {
		problems = append(problems, fmt.Sprintf("conditions %v, want [ExternalCheck Ready]", got))
	}
	if !n.Spec.Unschedulable {
		problems = append(problems, "the cordon was undone")
	}
	cordoned := corev1.Taint{Key: corev1.TaintNodeUnschedulable, Effect: corev1.TaintEffectNoSchedule}
	for _, want := range []corev1.Taint{providerTaint, userTaint, cordoned} {
		if !hasTaint(n, want) {
			problems = append(problems, fmt.Sprintf("taint %s missing", want.ToString()))
		}
	}
	if hasTaint(n, gpuTaint) {
		problems = append(problems, "the dropped GPU taint is still there")
	}
	return problems
}

// TestNodeStatusShrinksAndKeepsOthers has the provider take a GPU away
// (capacity, condition, label, annotation, taint) while another client
// cordons the node, labels, annotates and taints it and sets a condition:
// the Node ends with exactly the provider's fields plus the other client's,
// and keeps them across later status writes.
func TestNodeStatusShrinksAndKeepsOthers(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	np, name := startNodeWith(t, c, gpuNode)

	n := getNode(t, c, name)
	if _, ok := n.Status.Capacity[gpu]; !ok || n.Labels["vk.test/accelerator"] != "gpu" ||
		n.Annotations["vk.test/driver"] != "535" || !hasTaint(n, gpuTaint) ||
		!slices.Contains(conditionTypes(n), "vk.test/GPUHealthy") {
		t.Fatalf("node not registered as specified: labels=%v annotations=%v taints=%v capacity=%v conditions=%v",
			n.Labels, n.Annotations, n.Spec.Taints, n.Status.Capacity, conditionTypes(n))
	}

	// The other client, kubectl, works while the provider changes the node.
	condition, _ := json.Marshal(map[string]any{"status": map[string]any{"conditions": []corev1.NodeCondition{{
		Type: "ExternalCheck", Status: corev1.ConditionTrue, Reason: "Checked", Message: "set by another client",
		LastHeartbeatTime: metav1.Now(), LastTransitionTime: metav1.Now(),
	}}}})
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	wg.Add(2)
	go func() {
		defer wg.Done()
		for _, args := range [][]string{
			{"cordon", name},
			{"label", "node", name, "user.test/team=ops"},
			{"annotate", "node", name, "user.test/note=mine"},
			{"taint", "node", name, userTaint.ToString()},
			{"patch", "node", name, "--subresource=status", "--type=strategic", "-p", string(condition)},
		} {
			if out, err := c.Kubectl(ctx, args...); err != nil {
				errs <- fmt.Errorf("kubectl %v: %v: %s", args, err, out)
			}
		}
	}()
	go func() {
		defer wg.Done()
		// Twice: the second write has nothing new, and must not undo the
		// other client's changes either.
		for range 2 {
			if err := np.UpdateStatus(ctx, withoutGPU(name)); err != nil {
				errs <- err
			}
			time.Sleep(300 * time.Millisecond)
		}
	}()
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}

	eventually(t, "node has the provider's fields and the other client's", func() (bool, string) {
		n := getNode(t, c, name)
		problems := nodeProblems(n)
		return len(problems) == 0, fmt.Sprint(problems)
	})
	// Periodic status writes (every 2s here) keep it so.
	before := getNode(t, c, name)
	eventually(t, "two more status writes", func() (bool, string) {
		n := getNode(t, c, name)
		ready := readyCondition(n)
		return ready.LastHeartbeatTime.Sub(readyCondition(before).LastHeartbeatTime.Time) >= 3*time.Second, ready.LastHeartbeatTime.String()
	})
	after := getNode(t, c, name)
	if problems := nodeProblems(after); len(problems) != 0 {
		t.Fatalf("after more status writes: %v", problems)
	}
	// The heartbeat moved; Ready's transition time did not.
	if was, is := readyCondition(before).LastTransitionTime, readyCondition(after).LastTransitionTime; !is.Equal(&was) {
		t.Errorf("Ready's transition time moved without a change: %v -> %v", was, is)
	}
}

func readyCondition(n *corev1.Node) corev1.NodeCondition {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c
		}
	}
	return corev1.NodeCondition{}
}

// TestControlPlaneTaintsSurvive has the node lifecycle controller taint the
// node not-ready, then the provider change its own taints and labels: the
// controller's taints stay.
func TestControlPlaneTaintsSurvive(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	np, name := startNodeWith(t, c, gpuNode)

	notReady := gpuNode(name)
	notReady.Status.Conditions[0].Status = corev1.ConditionFalse
	notReady.Status.Conditions[0].Reason = "ProviderDown"
	if err := np.UpdateStatus(ctx, notReady); err != nil {
		t.Fatal(err)
	}
	controllers := corev1.Taint{Key: corev1.TaintNodeNotReady, Effect: corev1.TaintEffectNoSchedule}
	eventually(t, "node lifecycle controller taints the node not-ready", func() (bool, string) {
		n := getNode(t, c, name)
		return hasTaint(n, controllers), fmt.Sprint(n.Spec.Taints)
	})

	// Still not ready, but without the GPU: our labels and taints change.
	update := withoutGPU(name)
	update.Status.Conditions = notReady.Status.Conditions[:1]
	if err := np.UpdateStatus(ctx, update); err != nil {
		t.Fatal(err)
	}
	eventually(t, "provider's change written, controller's taint kept", func() (bool, string) {
		n := getNode(t, c, name)
		ok := n.Labels["vk.test/accelerator"] == "none" && !hasTaint(n, gpuTaint) && hasTaint(n, providerTaint) && hasTaint(n, controllers)
		return ok, fmt.Sprintf("labels=%v taints=%v", n.Labels, n.Spec.Taints)
	})
	time.Sleep(2500 * time.Millisecond) // a status write more
	if n := getNode(t, c, name); !hasTaint(n, controllers) || !hasTaint(n, providerTaint) {
		t.Fatalf("taints after a status write: %v", n.Spec.Taints)
	}
}

// TestDualStackAddresses registers a node with two InternalIPs, which
// server-side apply cannot key, and then drops one.
func TestDualStackAddresses(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	v4 := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}
	v6 := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "2001:db8::10"}
	host := corev1.NodeAddress{Type: corev1.NodeHostName, Address: "vk-dual"}
	dual := func(name string) *corev1.Node {
		n := nodeSpec(name)
		n.Status.Addresses = []corev1.NodeAddress{v4, v6, host}
		return n
	}
	np, name := startNodeWith(t, c, dual)
	if got := getNode(t, c, name).Status.Addresses; !slices.Equal(got, []corev1.NodeAddress{v4, v6, host}) {
		t.Fatalf("addresses %v, want both InternalIPs and the hostname", got)
	}
	update := nodeSpec(name)
	update.Status.Addresses = []corev1.NodeAddress{v4, host}
	if err := np.UpdateStatus(ctx, update); err != nil {
		t.Fatal(err)
	}
	eventually(t, "IPv6 address removed", func() (bool, string) {
		got := getNode(t, c, name).Status.Addresses
		return slices.Equal(got, []corev1.NodeAddress{v4, host}), fmt.Sprint(got)
	})
}

// pingSwitch is a node provider whose Ping fails while down is set, and
// which counts the pings it was asked.
type pingSwitch struct {
	*node.NaiveNodeProviderV2
	down  atomic.Bool
	pings atomic.Int64
}

func (p *pingSwitch) Ping(ctx context.Context) error {
	p.pings.Add(1)
	if p.down.Load() {
		return errors.New("backend down")
	}
	return p.NaiveNodeProviderV2.Ping(ctx)
}

// waitPings waits until the controller has asked k more pings of p.
func waitPings(t *testing.T, p *pingSwitch, k int64) {
	t.Helper()
	until := p.pings.Load() + k
	eventually(t, fmt.Sprintf("%d more pings", k), func() (bool, string) {
		return p.pings.Load() >= until, fmt.Sprint(p.pings.Load())
	})
}

// setReady writes the Node's Ready condition as the node lifecycle
// controller does when a node's heartbeats stop: an update of the status,
// under its own field manager.
func setReady(t *testing.T, c *testcluster.Cluster, name string, status corev1.ConditionStatus) {
	t.Helper()
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n := getNode(t, c, name)
		for i := range n.Status.Conditions {
			if n.Status.Conditions[i].Type == corev1.NodeReady {
				n.Status.Conditions[i].Status = status
				n.Status.Conditions[i].Reason = "NodeStatusUnknown"
				n.Status.Conditions[i].Message = "Kubelet stopped posting node status."
			}
		}
		_, err := c.Client.CoreV1().Nodes().UpdateStatus(context.Background(), n, metav1.UpdateOptions{FieldManager: "node-lifecycle-test"})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readyStatus(n *corev1.Node) corev1.ConditionStatus {
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status
		}
	}
	return ""
}

// TestOverwrittenReadyIsWrittenBack plays the node lifecycle controller,
// which sets Ready to Unknown when a node's heartbeats stop. The node
// writes its Ready back as soon as it sees that and its provider answers
// Ping, an hour before its next status report, as the kubelet does; while
// the provider is down it leaves Unknown alone. Both with the node's own
// watch of its Node and with one shared by the nodes of a process.
func TestOverwrittenReadyIsWrittenBack(t *testing.T) {
	c := testcluster.Shared(t)
	for _, shared := range []bool{false, true} {
		t.Run(fmt.Sprintf("shared=%t", shared), func(t *testing.T) {
			p := &pingSwitch{NaiveNodeProviderV2: node.NewNaiveNodeProvider()}
			_, name := startNode(t, c, notifyingProvider{newTestProvider()}, func(cfg *nodeutil.Config) {
				cfg.NodeProvider = p
				cfg.NodeOptions = append(cfg.NodeOptions, node.WithNodeStatusUpdateInterval(time.Hour))
				if shared {
					cfg.NodeOptions = append(cfg.NodeOptions, node.WithNodeWatch(sharedNodeWatch(t, c, cfg.Node.Name)))
				}
			})
			isReady := func(want corev1.ConditionStatus) func() (bool, string) {
				return func() (bool, string) {
					got := readyStatus(getNode(t, c, name))
					return got == want, string(got)
				}
			}

			setReady(t, c, name, corev1.ConditionUnknown)
			eventually(t, "Ready True again", isReady(corev1.ConditionTrue))

			p.down.Store(true)
			waitPings(t, p, 2)
			setReady(t, c, name, corev1.ConditionUnknown)
			waitPings(t, p, 3)
			if got := readyStatus(getNode(t, c, name)); got != corev1.ConditionUnknown {
				t.Fatalf("Ready %q while the provider is down, want the lifecycle controller's Unknown left alone", got)
			}
			p.down.Store(false)
			eventually(t, "Ready True once the provider is back", isReady(corev1.ConditionTrue))
		})
	}
}

// sharedNodeWatch is a nodeutil.NodeWatch on its own informer, seeing the
// Node called name, stopped when the test ends.
func sharedNodeWatch(t *testing.T, c *testcluster.Cluster, name string) *nodeutil.NodeWatch {
	t.Helper()
	factory := informers.NewSharedInformerFactoryWithOptions(c.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.FieldSelector = "metadata.name=" + name }))
	w, err := nodeutil.NewNodeWatch(factory.Core().V1().Nodes())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	factory.Start(ctx.Done())
	t.Cleanup(func() {
		cancel()
		factory.Shutdown()
	})
	return w
}

// TestProviderCannotClaimLabels has the provider report its node as the
// control plane, with another node's hostname, beside labels a kubelet
// may set: the Node in the API server gets only the allowed ones.
func TestProviderCannotClaimLabels(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	np, name := startNodeWith(t, c, func(name string) *corev1.Node {
		n := nodeSpec(name)
		n.Labels[corev1.LabelHostname] = name
		return n
	})

	hostile := nodeSpec(name)
	hostile.Labels["node-role.kubernetes.io/control-plane"] = ""
	hostile.Labels["node-restriction.kubernetes.io/pool"] = "trusted"
	hostile.Labels[corev1.LabelHostname] = "other"
	hostile.Labels[corev1.LabelTopologyZone] = "z1"
	hostile.Labels["example.com/x"] = "y"
	if err := np.UpdateStatus(ctx, hostile); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the allowed labels on the Node", func() (bool, string) {
		n := getNode(t, c, name)
		return n.Labels[corev1.LabelTopologyZone] == "z1" && n.Labels["example.com/x"] == "y", fmt.Sprint(n.Labels)
	})
	n := getNode(t, c, name)
	_, controlPlane := n.Labels["node-role.kubernetes.io/control-plane"]
	_, pool := n.Labels["node-restriction.kubernetes.io/pool"]
	if controlPlane || pool || n.Labels[corev1.LabelHostname] != name {
		t.Errorf("the provider claimed labels: %v", n.Labels)
	}
}
