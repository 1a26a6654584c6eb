//go:build e2e

package node_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
	"github.com/vkubelet/virtual-kubelet/test/poll"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

const timeout = 60 * time.Second

func nodeSpec(name string) *corev1.Node {
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("20"),
		corev1.ResourceMemory: resource.MustParse("100Gi"),
		corev1.ResourcePods:   resource.MustParse("1000"),
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"type": "virtual-kubelet"}},
		Spec: corev1.NodeSpec{Taints: []corev1.Taint{{
			Key: "virtual-kubelet.io/provider", Value: "test", Effect: corev1.TaintEffectNoSchedule,
		}}},
		Status: corev1.NodeStatus{
			Capacity:    capacity,
			Allocatable: capacity,
			// Documentation range: never dialled, only handed to pods as host IP.
			Addresses: []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: "192.0.2.10"}},
			Conditions: []corev1.NodeCondition{{
				Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "KubeletReady", Message: "test provider is ready",
			}},
		},
	}
}

// nodeCancels holds the cancel func of each node startNode started.
var nodeCancels sync.Map

// startNode runs a virtual node for the test and stops it when the test ends.
func startNode(t *testing.T, c *testcluster.Cluster, provider node.PodLifecycleHandler, tweak func(*nodeutil.Config)) (*nodeutil.Node, string) {
	t.Helper()
	name := testcluster.UniqueName("vk")
	cfg := nodeutil.Config{
		Client:   c.Client,
		Node:     nodeSpec(name),
		Provider: provider,
		Workers:  4,
		NodeOptions: []node.NodeControllerOpt{
			node.WithNodePingInterval(500 * time.Millisecond),
			node.WithNodeStatusUpdateInterval(2 * time.Second),
		},
		ConfigurePodController: func(pc *node.PodControllerConfig) {
			pc.StatusPollInterval = 200 * time.Millisecond
			pc.ProviderResyncInterval = 500 * time.Millisecond
		},
	}
	if tweak != nil {
		tweak(&cfg)
	}
	n, err := nodeutil.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	nodeCancels.Store(n, cancel)
	go func() { _ = n.Run(ctx) }()
	t.Cleanup(func() {
		cancel()
		<-n.Done()
		_ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	})
	select {
	case <-n.Ready():
	case <-n.Done():
		t.Fatalf("node did not start: %v", n.Err())
	case <-time.After(timeout):
		t.Fatal("node not ready in time")
	}
	return n, name
}

func newPod(ns, nodeName, name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: corev1.PodSpec{
			NodeName:   nodeName,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}},
		},
	}
}

// eventually polls cond until it holds, failing the test with what cond
// last said otherwise.
func eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	poll.Until(t, timeout, what, cond)
}

func waitPod(t *testing.T, client kubernetes.Interface, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	return poll.Pod(t, client, timeout, ns, name, what, cond)
}

func waitGone(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	eventually(t, "pod "+name+" gone", func() (bool, string) {
		_, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		return apierrors.IsNotFound(err), fmt.Sprint(err)
	})
}

// runPod creates a plain pod on the node and waits until it is Running.
func runPod(t *testing.T, c *testcluster.Cluster, ns, nodeName, name string) *corev1.Pod {
	t.Helper()
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), newPod(ns, nodeName, name), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	return waitPod(t, c.Client, ns, name, "Running", phaseIs(corev1.PodRunning))
}

func phaseIs(phase corev1.PodPhase) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool { return p.Status.Phase == phase }
}

func TestNodeRegistersAndRenewsLease(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	_, name := startNode(t, c, notifyingProvider{newTestProvider()}, func(cfg *nodeutil.Config) {
		cfg.LeaseDurationSeconds = 4 // renewed every second
	})

	n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if n.Labels["type"] != "virtual-kubelet" || len(n.Spec.Taints) == 0 || n.Status.Capacity.Pods().Value() != 1000 {
		t.Fatalf("node not registered as specified: labels=%v taints=%v capacity=%v", n.Labels, n.Spec.Taints, n.Status.Capacity)
	}

	lease, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatalf("lease in kube-node-lease: %v", err)
	}
	if *lease.Spec.HolderIdentity != name || *lease.Spec.LeaseDurationSeconds != 4 {
		t.Fatalf("lease holder %q duration %d", *lease.Spec.HolderIdentity, *lease.Spec.LeaseDurationSeconds)
	}
	if len(lease.OwnerReferences) != 1 || lease.OwnerReferences[0].UID != n.UID {
		t.Fatalf("lease must be owned by the node: %v", lease.OwnerReferences)
	}
	first := lease.Spec.RenewTime.Time
	eventually(t, "lease renewed", func() (bool, string) {
		l, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return l.Spec.RenewTime.After(first), l.Spec.RenewTime.String()
	})
	// The controller keeps its copy of the lease without managed fields;
	// its updates leave the API server's in place.
	renewed, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(renewed.ManagedFields) == 0 {
		t.Errorf("the renewed lease lost its managed fields")
	}

	// The node lifecycle controller trusts the lease: the node stays Ready.
	ready := func(n *corev1.Node) bool {
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue
			}
		}
		return false
	}
	if !ready(n) {
		t.Fatalf("node not Ready: %v", n.Status.Conditions)
	}
}

func TestNodeRecreatedAfterDeletion(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	_, name := startNode(t, c, notifyingProvider{newTestProvider()}, nil)
	n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Client.CoreV1().Nodes().Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "node registered again", func() (bool, string) {
		again, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return again.UID != n.UID, string(again.UID)
	})
	eventually(t, "lease owned by the new node", func() (bool, string) {
		again, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		l, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(l.OwnerReferences) == 1 && l.OwnerReferences[0].UID == again.UID, fmt.Sprint(l.OwnerReferences)
	})
}

func TestNodeStatusFromProvider(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	np := node.NewNaiveNodeProvider()
	n, name := startNode(t, c, notifyingProvider{newTestProvider()}, func(cfg *nodeutil.Config) {
		cfg.NodeProvider = np
	})
	update := nodeSpec(name)
	update.Status.Allocatable = corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("50Gi")}
	update.Status.Conditions = append(update.Status.Conditions, corev1.NodeCondition{
		Type: corev1.NodeMemoryPressure, Status: corev1.ConditionTrue, Reason: "Pressure", Message: "provider is out of memory",
	})
	if err := np.UpdateStatus(ctx, update); err != nil {
		t.Fatal(err)
	}
	eventually(t, "provider's condition written", func() (bool, string) {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, cond := range n.Status.Conditions {
			if cond.Type == corev1.NodeMemoryPressure {
				return cond.Status == corev1.ConditionTrue && cond.Reason == "Pressure", cond.Reason
			}
		}
		return false, fmt.Sprint(n.Status.Conditions)
	})
	// What limits.* env references of pods resolve to follows the provider.
	if got := n.NodeController().Node().Status.Allocatable[corev1.ResourceMemory]; got.Cmp(resource.MustParse("50Gi")) != 0 {
		t.Errorf("Node() allocatable memory = %s, want 50Gi", got.String())
	}
}

func TestPodLifecycle(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := newTestProvider()
	_, nodeName := startNode(t, c, notifyingProvider{p}, nil)
	pods := c.Client.CoreV1().Pods(ns)

	pod := newPod(ns, nodeName, "web")
	pod.Spec.Containers[0].Env = []corev1.EnvVar{
		{Name: "NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
		{Name: "GREETING", Value: "hello $(NAME)"},
		// Known before the provider reports the pod: the node's address.
		{Name: "HOST_IP", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "status.hostIP"}}},
		// No memory limit: the node's allocatable, as on a kubelet.
		{Name: "MEM_LIMIT_GI", ValueFrom: &corev1.EnvVarSource{ResourceFieldRef: &corev1.ResourceFieldSelector{
			Resource: "limits.memory", Divisor: resource.MustParse("1Gi")}}},
	}
	// Holds the object after deletion so the test can read its final status.
	pod.Finalizers = []string{"test.vkubelet.io/hold"}
	if _, err := pods.Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	running := waitPod(t, c.Client, ns, "web", "Running", phaseIs(corev1.PodRunning))
	if running.Status.PodIP != "10.100.0.1" || running.Status.QOSClass == "" {
		t.Errorf("status not merged: podIP=%q qosClass=%q", running.Status.PodIP, running.Status.QOSClass)
	}
	given := p.pod(ns, "web")
	env := map[string]string{}
	for _, e := range given.Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["NAME"] != "web" || env["GREETING"] != "hello web" || env["KUBERNETES_SERVICE_HOST"] != "10.0.0.1" || env["MEM_LIMIT_GI"] != "100" || env["HOST_IP"] != "192.0.2.10" {
		t.Errorf("provider got unresolved env: %v", env)
	}

	// A label change is an update; a status write is not.
	running.Labels = map[string]string{"tier": "front"}
	if _, err := pods.Update(ctx, running, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "UpdatePod called", func() (bool, string) {
		got := p.pod(ns, "web")
		return got != nil && got.Labels["tier"] == "front", fmt.Sprint(p.count("UpdatePod"))
	})
	time.Sleep(time.Second)
	if n := p.count("UpdatePod"); n != 1 {
		t.Errorf("UpdatePod called %d times for one change", n)
	}
	if n := p.count("CreatePod"); n != 1 {
		t.Errorf("CreatePod called %d times", n)
	}

	// Graceful deletion: the provider stops the pod, its terminal status is
	// written, then the object is deleted with grace 0.
	if err := pods.Delete(ctx, "web", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](30)}); err != nil {
		t.Fatal(err)
	}
	final := waitPod(t, c.Client, ns, "web", "deleted with its terminal status", func(p *corev1.Pod) bool {
		return p.DeletionGracePeriodSeconds != nil && *p.DeletionGracePeriodSeconds == 0
	})
	if final.Status.Phase != corev1.PodSucceeded || final.Status.ContainerStatuses[0].State.Terminated == nil {
		t.Errorf("terminal status not written before deletion: %+v", final.Status)
	}
	if p.pod(ns, "web") != nil {
		t.Error("pod still in the provider")
	}
	removeFinalizers(t, c.Client, ns, "web")
	waitGone(t, c.Client, ns, "web")
}

func removeFinalizers(t *testing.T, client kubernetes.Interface, ns, name string) {
	t.Helper()
	_, err := client.CoreV1().Pods(ns).Patch(context.Background(), name, types.MergePatchType, []byte(`{"metadata":{"finalizers":null}}`), metav1.PatchOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
}

func TestForceDelete(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := newTestProvider()
	_, nodeName := startNode(t, c, notifyingProvider{p}, nil)
	runPod(t, c, ns, nodeName, "doomed")
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "doomed", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "provider deletes a force-deleted pod", func() (bool, string) {
		return p.pod(ns, "doomed") == nil && p.count("DeletePod") >= 1, fmt.Sprint(p.count("DeletePod"))
	})
}

func TestMissingConfigMapKeepsPodPending(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := newTestProvider()
	_, nodeName := startNode(t, c, notifyingProvider{p}, nil)

	withRef := func(name string, optional bool) *corev1.Pod {
		pod := newPod(ns, nodeName, name)
		pod.Spec.Containers[0].EnvFrom = []corev1.EnvFromSource{{ConfigMapRef: &corev1.ConfigMapEnvSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Optional: ptr.To(optional)}}}
		pod.Spec.Containers[0].Env = []corev1.EnvVar{{Name: "TOKEN", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{
			LocalObjectReference: corev1.LocalObjectReference{Name: "creds"}, Key: "token", Optional: ptr.To(optional)}}}}
		return pod
	}
	for _, pod := range []*corev1.Pod{withRef("mandatory", false), withRef("optional", true)} {
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	waitPod(t, c.Client, ns, "optional", "Running without its optional references", phaseIs(corev1.PodRunning))
	pending := waitPod(t, c.Client, ns, "mandatory", "waiting with CreateContainerConfigError", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return p.Status.Phase == corev1.PodPending && len(cs) == 1 && cs[0].State.Waiting != nil &&
			cs[0].State.Waiting.Reason == node.ReasonCreateContainerConfigError
	})
	if msg := pending.Status.ContainerStatuses[0].State.Waiting.Message; !strings.Contains(msg, `configmap "settings" not found`) {
		t.Errorf("waiting message %q does not name the ConfigMap", msg)
	}
	if p.pod(ns, "mandatory") != nil {
		t.Fatal("a pod with a missing mandatory ConfigMap reached the provider")
	}
	eventually(t, "warning event", func() (bool, string) {
		evs, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("involvedObject.name", "mandatory").String()})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == node.ReasonFailed && strings.Contains(e.Message, "settings") {
				return true, ""
			}
		}
		return false, fmt.Sprint(len(evs.Items), " events")
	})

	// Once the ConfigMap and Secret exist, the pod starts.
	if _, err := c.Client.CoreV1().ConfigMaps(ns).Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"MODE": "fast"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c.Client, ns, "mandatory", "still waiting for the Secret", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && strings.Contains(cs[0].State.Waiting.Message, `secret "creds" not found`)
	})
	if _, err := c.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"token": "s3cret"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c.Client, ns, "mandatory", "Running once its ConfigMap and Secret exist", phaseIs(corev1.PodRunning))
	env := map[string]string{}
	for _, e := range p.pod(ns, "mandatory").Spec.Containers[0].Env {
		env[e.Name] = e.Value
	}
	if env["MODE"] != "fast" || env["TOKEN"] != "s3cret" {
		t.Errorf("resolved env: %v", env)
	}
}

func TestPollingFallback(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	p := newTestProvider() // no NotifyPods: the controller must poll
	_, nodeName := startNode(t, c, p, nil)
	running := runPod(t, c, ns, nodeName, "polled")
	p.finish(running, 3)
	done := waitPod(t, c.Client, ns, "polled", "Failed", phaseIs(corev1.PodFailed))
	if code := done.Status.ContainerStatuses[0].State.Terminated.ExitCode; code != 3 {
		t.Errorf("exit code %d, want 3", code)
	}
	if p.count("GetPodStatus") == 0 {
		t.Error("the provider was never polled")
	}
}

func TestLostAndOrphanPods(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	p := newTestProvider()
	_, nodeName := startNode(t, c, notifyingProvider{p}, nil)

	// restartPolicy Never: the pod fails.
	lost := newPod(ns, nodeName, "lost")
	lost.Spec.RestartPolicy = corev1.RestartPolicyNever
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, lost, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c.Client, ns, "lost", "Running", phaseIs(corev1.PodRunning))
	p.lose(ns, "lost")
	failed := waitPod(t, c.Client, ns, "lost", "Failed after the provider lost it", phaseIs(corev1.PodFailed))
	term := failed.Status.ContainerStatuses[0].State.Terminated
	if failed.Status.Reason != node.ReasonProviderLost || term == nil || term.Reason != "ContainerStatusUnknown" || term.ExitCode != 137 {
		t.Errorf("lost pod status: reason=%q container=%+v", failed.Status.Reason, failed.Status.ContainerStatuses[0].State)
	}

	// restartPolicy Always (the default): it is created again, the restart
	// counted, its last state the lost run.
	runPod(t, c, ns, nodeName, "restarted")
	created := p.count("CreatePod")
	p.lose(ns, "restarted")
	again := waitPod(t, c.Client, ns, "restarted", "created again with a restart counted", func(pod *corev1.Pod) bool {
		return pod.Status.Phase == corev1.PodRunning && len(pod.Status.ContainerStatuses) == 1 && pod.Status.ContainerStatuses[0].RestartCount == 1
	})
	if last := again.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.Reason != "ContainerStatusUnknown" {
		t.Errorf("last state of the restarted container: %+v", again.Status.ContainerStatuses[0].LastTerminationState)
	}
	if p.pod(ns, "restarted") == nil || p.count("CreatePod") != created+1 {
		t.Errorf("the provider got %d CreatePod calls for the lost pod, want 1", p.count("CreatePod")-created)
	}

	// A pod only the provider has is deleted from it.
	orphan := newPod(ns, nodeName, "orphan")
	if err := p.CreatePod(ctx, orphan); err != nil {
		t.Fatal(err)
	}
	eventually(t, "orphan deleted from the provider", func() (bool, string) {
		return p.pod(ns, "orphan") == nil, ""
	})
}

// TestRunLeavesNoGoroutines shows that once Run returns, the node, its
// informers, queues, workers and event broadcaster are all gone. Only HTTP
// connections the client keeps for reuse may stay.
func TestRunLeavesNoGoroutines(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	before := goleak.IgnoreCurrent()

	p := newTestProvider()
	name := testcluster.UniqueName("vk")
	n, err := nodeutil.New(nodeutil.Config{Client: c.Client, Node: nodeSpec(name), Provider: notifyingProvider{p}, Workers: 2})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go func() { _ = n.Run(ctx) }()
	<-n.Ready()
	if _, err := c.Client.CoreV1().Pods(ns).Create(context.Background(), newPod(ns, name, "p"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitPod(t, c.Client, ns, "p", "Running", phaseIs(corev1.PodRunning))
	cancel()
	select {
	case <-n.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("Run did not return within 10s of cancellation")
	}
	if err := n.Err(); err != nil {
		t.Fatalf("Run: %v", err)
	}
	_ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
	goleak.VerifyNone(t, before,
		goleak.IgnoreTopFunction("net/http.(*persistConn).readLoop"),
		goleak.IgnoreTopFunction("net/http.(*persistConn).writeLoop"),
		goleak.IgnoreTopFunction("net/http.(*http2ClientConn).readLoop"),
		goleak.IgnoreTopFunction("golang.org/x/net/http2.(*ClientConn).readLoop"),
		goleak.IgnoreTopFunction("internal/poll.runtime_pollWait"),
	)
}
