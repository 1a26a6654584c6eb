package node

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	corev1ac "k8s.io/client-go/applyconfigurations/core/v1"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vkubelet/virtual-kubelet/node/intern"
)

func taint(key, value string, effect corev1.TaintEffect) corev1.Taint {
	return corev1.Taint{Key: key, Value: value, Effect: effect}
}

func TestReconcileTaints(t *testing.T) {
	ours := taint("vk/provider", "mock", corev1.TaintEffectNoSchedule)
	oldOurs := taint("vk/old", "", corev1.TaintEffectNoExecute)
	notReady := taint("node.kubernetes.io/not-ready", "", corev1.TaintEffectNoSchedule)
	user := taint("dedicated", "gpu", corev1.TaintEffectNoSchedule)
	// The same key with another effect is another taint.
	oursOtherEffect := taint("vk/provider", "user", corev1.TaintEffectPreferNoSchedule)

	for _, tc := range []struct {
		name               string
		have, before, want []corev1.Taint
		expect             []corev1.Taint
	}{
		{"first registration keeps the control plane's", []corev1.Taint{notReady}, nil, []corev1.Taint{ours}, []corev1.Taint{notReady, ours}},
		{"one we set and no longer want goes", []corev1.Taint{user, oldOurs, ours}, []corev1.Taint{oldOurs, ours}, []corev1.Taint{ours}, []corev1.Taint{user, ours}},
		{"value follows ours, in place", []corev1.Taint{taint("vk/provider", "x", corev1.TaintEffectNoSchedule), user}, []corev1.Taint{ours}, []corev1.Taint{ours}, []corev1.Taint{ours, user}},
		{"others' taints are never removed", []corev1.Taint{user, notReady, oursOtherEffect}, []corev1.Taint{user, ours}, []corev1.Taint{ours}, []corev1.Taint{notReady, oursOtherEffect, ours}},
		{"none wanted, none before", []corev1.Taint{user}, nil, nil, []corev1.Taint{user}},
		{"all of ours removed", []corev1.Taint{ours}, []corev1.Taint{ours}, nil, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			have := append([]corev1.Taint(nil), tc.have...)
			got := reconcileTaints(have, tc.before, tc.want)
			if !reflect.DeepEqual(got, tc.expect) {
				t.Fatalf("got %v, want %v", got, tc.expect)
			}
			if !reflect.DeepEqual(have, tc.have) {
				t.Fatalf("have was modified: %v", have)
			}
		})
	}
}

func TestKeepTransitionTimes(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC))
	given := metav1.NewTime(time.Date(2026, 2, 2, 3, 4, 5, 0, time.UTC))
	from := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, LastTransitionTime: then},
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionFalse, LastTransitionTime: then},
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastTransitionTime: then},
	}
	to := []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},                                    // same status: kept
		{Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue},                           // changed: none yet
		{Type: corev1.NodeDiskPressure, Status: corev1.ConditionFalse, LastTransitionTime: given}, // provider's own
		{Type: "Custom", Status: corev1.ConditionTrue},                                            // new
	}
	keepTransitionTimes(from, to)
	want := []metav1.Time{then, {}, given, {}}
	for i, c := range to {
		if !c.LastTransitionTime.Equal(&want[i]) {
			t.Errorf("%s: transition time %v, want %v", c.Type, c.LastTransitionTime, want[i])
		}
	}
}

// The heartbeat moves on every write; the transition time only when a
// provider update changes a condition's status.
func TestConditionTimesAcrossUpdates(t *testing.T) {
	n := &NodeController{labels: NewNodeLabelGuard(""), desired: &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue},
	}}}}
	n.touchConditions()
	first := n.desired.Status.Conditions[0]
	if first.LastTransitionTime.IsZero() || first.LastHeartbeatTime.IsZero() {
		t.Fatalf("times not set: %+v", first)
	}
	// Stamped to the second, as the API keeps them.
	time.Sleep(1100 * time.Millisecond)

	same := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}}
	if n.setDesired(context.Background(), same) {
		t.Error("a status-only update reported an object change")
	}
	n.touchConditions()
	c := n.desired.Status.Conditions[0]
	if !c.LastTransitionTime.Equal(&first.LastTransitionTime) {
		t.Errorf("transition time moved without a status change: %v -> %v", first.LastTransitionTime, c.LastTransitionTime)
	}
	if !c.LastHeartbeatTime.After(first.LastHeartbeatTime.Time) {
		t.Errorf("heartbeat did not move: %v -> %v", first.LastHeartbeatTime, c.LastHeartbeatTime)
	}

	changed := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionFalse}}}}
	n.setDesired(context.Background(), changed)
	n.touchConditions()
	if c := n.desired.Status.Conditions[0]; !c.LastTransitionTime.After(first.LastTransitionTime.Time) {
		t.Errorf("transition time did not move on a status change: %v -> %v", first.LastTransitionTime, c.LastTransitionTime)
	}
}

// TestSetDesiredRestrictsLabels: a provider's update that only adds
// labels NodeRestriction forbids changes nothing.
func TestSetDesiredRestrictsLabels(t *testing.T) {
	base := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "1", corev1.LabelHostname: "n"}}}
	n := &NodeController{name: "n", labels: NewNodeLabelGuard("n"), desired: base.DeepCopy()}
	update := base.DeepCopy()
	update.Labels["node-role.kubernetes.io/control-plane"] = ""
	update.Labels[corev1.LabelHostname] = "other"
	if n.setDesired(context.Background(), update) {
		t.Error("forbidden labels changed the node")
	}
	if got := n.Node().Labels; !reflect.DeepEqual(got, base.Labels) {
		t.Errorf("labels %v, want %v", got, base.Labels)
	}
	update.Labels["b"] = "2"
	if !n.setDesired(context.Background(), update) || n.Node().Labels["b"] != "2" {
		t.Errorf("an allowed label beside them did not arrive: %v", n.Node().Labels)
	}
}

func TestSetDesiredReportsObjectChanges(t *testing.T) {
	base := &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: "n", Labels: map[string]string{"a": "1"}},
		Spec:       corev1.NodeSpec{Taints: []corev1.Taint{taint("k", "v", corev1.TaintEffectNoSchedule)}},
	}
	for _, tc := range []struct {
		name   string
		change func(*corev1.Node)
		want   bool
	}{
		{"status only", func(n *corev1.Node) { n.Status.Phase = corev1.NodeRunning }, false},
		{"label", func(n *corev1.Node) { n.Labels["b"] = "2" }, true},
		{"annotation", func(n *corev1.Node) { n.Annotations = map[string]string{"x": "y"} }, true},
		{"taint", func(n *corev1.Node) { n.Spec.Taints = nil }, true},
		{"unschedulable", func(n *corev1.Node) { n.Spec.Unschedulable = true }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			n := &NodeController{labels: NewNodeLabelGuard("n"), desired: base.DeepCopy()}
			update := base.DeepCopy()
			tc.change(update)
			if got := n.setDesired(context.Background(), update); got != tc.want {
				t.Fatalf("setDesired = %v, want %v", got, tc.want)
			}
			if !reflect.DeepEqual(n.Node().Labels, update.Labels) || !reflect.DeepEqual(n.Node().Spec, update.Spec) {
				t.Fatalf("Node() = %+v, want the provider's %+v", n.Node(), update)
			}
		})
	}
}

// What the provider does not set is not in what is applied, so it is not
// claimed: a zero Unschedulable must not undo a cordon, zero times must not
// be sent as nulls.
func TestAsApplyConfigurationHasOnlySetFields(t *testing.T) {
	spec, err := asApplyConfiguration[corev1ac.NodeSpecApplyConfiguration](&corev1.NodeSpec{ProviderID: "p://1"})
	if err != nil {
		t.Fatal(err)
	}
	b, _ := json.Marshal(spec)
	if string(b) != `{"providerID":"p://1"}` {
		t.Errorf("spec applied as %s", b)
	}

	status, err := asApplyConfiguration[corev1ac.NodeStatusApplyConfiguration](&corev1.NodeStatus{
		Capacity:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("2")},
		Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}},
	})
	if err != nil {
		t.Fatal(err)
	}
	if got := (*status.Capacity)[corev1.ResourceCPU]; got.String() != "2" {
		t.Errorf("capacity cpu = %s", got.String())
	}
	c := status.Conditions[0]
	if *c.Type != corev1.NodeReady || c.LastHeartbeatTime != nil || c.LastTransitionTime != nil {
		t.Errorf("condition applied as %+v", c)
	}
	if status.Addresses != nil || status.Allocatable != nil {
		t.Errorf("unset fields applied: %+v", status)
	}
}

func TestHasDuplicateTypes(t *testing.T) {
	v4 := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "192.0.2.1"}
	v6 := corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "2001:db8::1"}
	host := corev1.NodeAddress{Type: corev1.NodeHostName, Address: "h"}
	for _, tc := range []struct {
		addresses []corev1.NodeAddress
		want      bool
	}{
		{nil, false},
		{[]corev1.NodeAddress{v4, host}, false},
		{[]corev1.NodeAddress{v4, host, v6}, true},
	} {
		if got := hasDuplicateTypes(tc.addresses); got != tc.want {
			t.Errorf("hasDuplicateTypes(%v) = %v, want %v", tc.addresses, got, tc.want)
		}
	}
}

// TestLeaseRenewalIsOneRequest: renewals write over the lease the last write
// returned, with no read, as the kubelet does; a stale copy (someone else
// wrote the lease) costs one read and the renewal still succeeds.
func TestLeaseRenewalIsOneRequest(t *testing.T) {
	client := fake.NewClientset()
	n, err := NewNodeController(NaiveNodeProvider{}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk", UID: "u"}},
		client.CoreV1().Nodes(), WithNodeEnableLeaseV1(client.CoordinationV1().Leases(corev1.NamespaceNodeLease), 0))
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	if err := n.ensureLease(ctx); err != nil {
		t.Fatal(err)
	}
	client.ClearActions()
	for range 3 {
		if err := n.updateLease(ctx); err != nil {
			t.Fatal(err)
		}
	}
	verbs := map[string]int{}
	for _, a := range client.Actions() {
		verbs[a.GetVerb()]++
	}
	if verbs["update"] != 3 || verbs["get"] != 0 {
		t.Errorf("three renewals made %v, want 3 updates and no get", verbs)
	}

	// Another writer: the cached copy's resource version is stale.
	client.PrependReactor("update", "leases", func(action k8stesting.Action) (bool, runtime.Object, error) {
		if action.(k8stesting.UpdateAction).GetObject().(*coordinationv1.Lease).ResourceVersion == "stale" {
			return true, nil, apierrors.NewConflict(coordinationv1.Resource("leases"), "vk", errors.New("stale"))
		}
		return false, nil, nil
	})
	n.lease.ResourceVersion = "stale"
	client.ClearActions()
	if err := n.updateLease(ctx); err != nil {
		t.Fatalf("renewal over a stale copy: %v", err)
	}
	verbs = map[string]int{}
	for _, a := range client.Actions() {
		verbs[a.GetVerb()]++
	}
	if verbs["get"] != 1 || verbs["update"] != 2 {
		t.Errorf("renewal over a stale copy made %v, want a conflict, one get and a second update", verbs)
	}
}

// TestTaintWriteCanceled: a taint write that fails because the daemon is
// shutting down is an error. (client-go's RetryOnConflict returns nil for
// an error wrapping context.Canceled; registration then used the nil Node
// it got, and the daemon panicked on its way out.)
func TestTaintWriteCanceled(t *testing.T) {
	current := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk", UID: "u"}}
	client := fake.NewClientset(current)
	client.PrependReactor("update", "nodes", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, nil, fmt.Errorf("put nodes/vk: %w", context.Canceled)
	})
	desired := current.DeepCopy()
	desired.Spec.Taints = []corev1.Taint{taint("virtual-kubelet.io/provider", "mock", corev1.TaintEffectNoSchedule)}
	n, err := NewNodeController(NaiveNodeProvider{}, desired, client.CoreV1().Nodes())
	if err != nil {
		t.Fatal(err)
	}
	written, err := n.writeTaints(context.Background(), current.DeepCopy())
	if !errors.Is(err, context.Canceled) || written != nil {
		t.Errorf("writeTaints = %v, %v; want no node and the cancellation", written, err)
	}
}

// TestWithNodeInternerSharesWhatNodesRepeat: controllers given one
// Interner keep one capacity between them, and the caller's node stays
// its own.
func TestWithNodeInternerSharesWhatNodesRepeat(t *testing.T) {
	in := intern.New()
	client := fake.NewClientset()
	capacity := corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("8"), corev1.ResourcePods: resource.MustParse("110")}
	var kept []corev1.ResourceList
	for _, name := range []string{"vk0", "vk1"} {
		spec := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}, Status: corev1.NodeStatus{Capacity: capacity.DeepCopy()}}
		n, err := NewNodeController(NaiveNodeProvider{}, spec, client.CoreV1().Nodes(), WithNodeInterner(in))
		if err != nil {
			t.Fatal(err)
		}
		if reflect.ValueOf(n.Node().Status.Capacity).Pointer() == reflect.ValueOf(spec.Status.Capacity).Pointer() {
			t.Errorf("%s: the controller keeps the caller's capacity, not a copy", name)
		}
		kept = append(kept, n.Node().Status.Capacity)
	}
	if reflect.ValueOf(kept[0]).Pointer() != reflect.ValueOf(kept[1]).Pointer() {
		t.Error("two controllers with one Interner keep two copies of one capacity")
	}
	if !apiequality.Semantic.DeepEqual(kept[0], capacity) {
		t.Errorf("capacity kept: %v, want %v", kept[0], capacity)
	}
}
