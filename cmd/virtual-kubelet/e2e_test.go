package main_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/internal/tracing/jaegertest"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
	"github.com/vkubelet/virtual-kubelet/test/poll"
)

const Timeout = 90 * time.Second

func Eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	EventuallyWithin(t, Timeout, what, cond)
}

func EventuallyWithin(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	poll.Until(t, limit, what, cond)
}

func WaitNodeReady(t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	Eventually(t, "node "+name+" Ready", func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, string(c.Status)
			}
		}
		return false, "no Ready condition"
	})
	return node
}

func WaitPod(t *testing.T, client kubernetes.Interface, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	return poll.Pod(t, client, Timeout, ns, name, what, cond)
}

// Tolerate lets a pod onto virtual-kubelet nodes.
var Tolerate = []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}

func TestNodeReadyWithLeaseAndCleanShutdown(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	cfg := filepath.Join(t.TempDir(), "mock.json")
	host := c.AddHost(t, testcluster.UniqueName("h"))
	// The provider config is keyed by node name.
	name := testcluster.UniqueName("vk")
	if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{%q: {"cpu": "8", "memory": "32Gi", "pods": "200", "nvidia.com/gpu": "2"}}`, name)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := StartDaemon(t, c, host, "--nodename", name, "--provider-config", cfg)
	node := WaitNodeReady(t, c.Client, name)

	wantLabels := map[string]string{
		"kubernetes.io/hostname": name, "kubernetes.io/os": "linux", "kubernetes.io/arch": "amd64",
		"kubernetes.io/role": "agent", "type": "virtual-kubelet",
	}
	for k, v := range wantLabels {
		if node.Labels[k] != v {
			t.Errorf("label %s=%q, want %q", k, node.Labels[k], v)
		}
	}
	// The node lifecycle controller may still have its not-ready taint on.
	want := corev1.Taint{Key: "virtual-kubelet.io/provider", Value: "mock", Effect: corev1.TaintEffectNoSchedule}
	found := false
	for _, taint := range node.Spec.Taints {
		found = found || (taint.Key == want.Key && taint.Value == want.Value && taint.Effect == want.Effect)
	}
	if !found {
		t.Errorf("taints %v lack %v", node.Spec.Taints, want)
	}
	if node.Status.Capacity.Cpu().String() != "8" || node.Status.Allocatable.Memory().String() != "32Gi" {
		t.Errorf("capacity %v allocatable %v", node.Status.Capacity, node.Status.Allocatable)
	}
	if q := node.Status.Capacity["nvidia.com/gpu"]; q.Value() != 2 {
		t.Errorf("extended resource missing: %v", node.Status.Capacity)
	}
	if len(node.Status.Addresses) != 1 || node.Status.Addresses[0].Address != host.Addr.String() || node.Status.DaemonEndpoints.KubeletEndpoint.Port != 10250 {
		t.Errorf("addresses %v endpoints %v", node.Status.Addresses, node.Status.DaemonEndpoints)
	}
	_, versionOut := RunBinary(t, "version")
	if kv := node.Status.NodeInfo.KubeletVersion; !strings.Contains(versionOut, kv) || !strings.HasPrefix(kv, "v1.36.3-vk.") {
		t.Errorf("nodeInfo.kubeletVersion %q not in `version` output %q", kv, versionOut)
	}
	lease, err := c.Client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, name, metav1.GetOptions{})
	if err != nil || *lease.Spec.HolderIdentity != name {
		t.Fatalf("lease: %v", err)
	}

	code, took := d.Shutdown(t)
	if code != 0 || took > 5*time.Second {
		t.Errorf("SIGTERM: exit code %d after %s, want 0 within a few seconds", code, took)
	}
	if out := d.Output.String(); strings.Contains(out, "panic") || strings.Contains(out, "DATA RACE") {
		t.Errorf("daemon output has a panic or race:\n%s", out)
	}
}

func TestProvidersAndVersion(t *testing.T) {
	code, out := RunBinary(t, "providers")
	if code != 0 || out != "grpc\nkubernetes\nmock\nslurm" {
		t.Errorf("providers: %d %q", code, out)
	}
	code, out = RunBinary(t, "version")
	if code != 0 || !strings.HasPrefix(out, "virtual-kubelet v") {
		t.Errorf("version: %d %q", code, out)
	}
}

func TestDeploymentRunsOnVirtualNode(t *testing.T) {
	ForEachTransport(t, testDeploymentRunsOnVirtualNode)
	// The process's watch of all bound pods (which sees the other tests'
	// nodes' pods on the shared cluster) gives the node only its own.
	t.Run("shared-pod-watch", func(t *testing.T) {
		testDeploymentRunsOnVirtualNode(t, Transport{"in-process", func(t *testing.T, c *testcluster.Cluster, host *nethost.Host, extra ...string) *Daemon {
			return StartDaemon(t, c, host, append(extra, "--shared-pod-watch")...)
		}})
	})
}

func testDeploymentRunsOnVirtualNode(t *testing.T, via Transport) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	d := via.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")))
	WaitNodeReady(t, c.Client, d.Name)

	dep := DeploymentOn(d.Name, "web", 20, nil, corev1.Container{Name: "web", Image: "nginx"})
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	selector := labels.SelectorFromSet(dep.Spec.Selector.MatchLabels).String()
	Eventually(t, "20 pods Running on the virtual node", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Spec.NodeName == d.Name && p.Status.Phase == corev1.PodRunning && p.Status.PodIP != "" {
				running++
			}
		}
		return running == 20, fmt.Sprintf("%d of %d running", running, len(pods.Items))
	})
	Eventually(t, "deployment available", func() (bool, string) {
		got, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.AvailableReplicas == 20, fmt.Sprint(got.Status.AvailableReplicas)
	})

	// Deleting the deployment drains the node.
	if err := c.Client.AppsV1().Deployments(ns).Delete(ctx, "web", metav1.DeleteOptions{PropagationPolicy: ptr.To(metav1.DeletePropagationForeground)}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "pods drained", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items))
	})
}

// DeploymentOn is a Deployment of replicas pods labelled app=name, with the
// annotations and containers given, placed on the virtual node.
func DeploymentOn(node, name string, replicas int32, annotations map[string]string, containers ...corev1.Container) *appsv1.Deployment {
	podLabels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelHostname: node},
					Tolerations:  Tolerate,
					Containers:   containers,
				},
			},
		},
	}
}

func TestScriptedPods(t *testing.T) { ForEachTransport(t, testScriptedPods) }

func testScriptedPods(t *testing.T, via Transport) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	d := via.Start(t, c, nil)
	WaitNodeReady(t, c.Client, d.Name)

	pod := func(name string, policy corev1.RestartPolicy, ann map[string]string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
			Spec: corev1.PodSpec{
				NodeName: d.Name, RestartPolicy: policy, Tolerations: Tolerate,
				Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
			},
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	pod("succeeds", corev1.RestartPolicyNever, map[string]string{mock.AnnotationRunFor: "1s"})
	pod("fails", corev1.RestartPolicyNever, map[string]string{mock.AnnotationRunFor: "1s", mock.AnnotationExitCode: "3"})
	pod("restarts", corev1.RestartPolicyOnFailure, map[string]string{mock.AnnotationRunFor: "300ms", mock.AnnotationExitCode: "2", mock.AnnotationRestartDelay: "200ms"})
	pod("cannot-start", corev1.RestartPolicyNever, map[string]string{mock.AnnotationFailStart: "image not found"})
	pod("bad-script", corev1.RestartPolicyNever, map[string]string{mock.AnnotationRunFor: "soon"})

	terminated := func(p *corev1.Pod) *corev1.ContainerStateTerminated {
		return p.Status.ContainerStatuses[0].State.Terminated
	}
	ok := WaitPod(t, c.Client, ns, "succeeds", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if term := terminated(ok); term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Errorf("succeeds: %+v", ok.Status.ContainerStatuses[0].State)
	}
	failed := WaitPod(t, c.Client, ns, "fails", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if term := terminated(failed); term == nil || term.ExitCode != 3 || term.Reason != "Error" {
		t.Errorf("fails: %+v", failed.Status.ContainerStatuses[0].State)
	}
	restarted := WaitPod(t, c.Client, ns, "restarts", "restarted 3 times", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 3
	})
	if last := restarted.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 2 {
		t.Errorf("restarts: last termination %+v", restarted.Status.ContainerStatuses[0].LastTerminationState)
	}
	if restarted.Status.Phase != corev1.PodRunning {
		t.Errorf("a restarting pod is Running, got %s", restarted.Status.Phase)
	}
	broken := WaitPod(t, c.Client, ns, "cannot-start", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if term := terminated(broken); term == nil || term.Reason != "StartError" || term.ExitCode != 128 || term.Message != "image not found" {
		t.Errorf("cannot-start: %+v", broken.Status.ContainerStatuses[0].State)
	}
	rejected := WaitPod(t, c.Client, ns, "bad-script", "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if rejected.Status.Reason != "ProviderRejected" || !strings.Contains(rejected.Status.Message, mock.AnnotationRunFor) {
		t.Errorf("bad-script: reason %q message %q", rejected.Status.Reason, rejected.Status.Message)
	}

	// Graceful deletion of everything drains the node.
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	Eventually(t, "all pods gone", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items))
	})
}

func TestTracesReachJaeger(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	collector := jaegertest.NewCollector()
	defer collector.Close()
	d := StartDaemon(t, c, nil, "--trace-exporter", "jaeger", "--jaeger-endpoint", collector.Endpoint(),
		"--trace-sample-rate", "always", "--trace-service-name", "vk-e2e", "--trace-tag", "env=test")
	WaitNodeReady(t, c.Client, d.Name)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "traced"},
		Spec:       corev1.PodSpec{NodeName: d.Name, Tolerations: Tolerate, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	WaitPod(t, c.Client, ns, "traced", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if code, _ := d.Shutdown(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	spans, errs := collector.Spans()
	if len(errs) > 0 {
		t.Fatalf("undecodable batches: %v", errs)
	}
	seen := map[string]bool{}
	for _, s := range spans {
		if s.Service != "vk-e2e" || s.Process["env"] != "test" {
			t.Fatalf("span %q from service %q with process tags %v", s.Name, s.Service, s.Process)
		}
		seen[s.Name] = true
	}
	for _, want := range []string{"syncPodsFromKubernetes", "provider.CreatePod", "syncPodStatusFromProvider", "node.register"} {
		if !seen[want] {
			t.Errorf("no %q span among %v", want, seen)
		}
	}
}

func TestBadInputFailsCleanly(t *testing.T) {
	c := testcluster.Shared(t)
	dir := t.TempDir()
	malformed := filepath.Join(dir, "bad.json")
	if err := os.WriteFile(malformed, []byte(`{"vk0": {"cpu": "eight"}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	noRemote := filepath.Join(dir, "no-remote.yaml")
	if err := os.WriteFile(noRemote, []byte("namespace: b\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// A remote cluster that is not there: a closed port on loopback.
	closed := filepath.Join(dir, "closed.kubeconfig")
	kubeconfig := fmt.Sprintf("apiVersion: v1\nkind: Config\nclusters: [{name: b, cluster: {server: \"https://127.0.0.1:%d\"}}]\n"+
		"contexts: [{name: b, context: {cluster: b}}]\ncurrent-context: b\n", freeport.Get(t))
	unreachable := filepath.Join(dir, "unreachable.yaml")
	trust := "sourceCluster: a\nsigningKeyFile: " + SigningKey(t) + "\n"
	if os.WriteFile(closed, []byte(kubeconfig), 0o600) != nil || os.WriteFile(unreachable, []byte("remote: {kubeconfig: "+closed+"}\nnamespace: b\n"+trust), 0o600) != nil {
		t.Fatal("writing configs")
	}
	noKey := filepath.Join(dir, "no-key.yaml")
	if err := os.WriteFile(noKey, []byte("remote: {kubeconfig: "+closed+"}\nnamespace: b\nsourceCluster: a\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	base := []string{"--nodename", "vk0", "--node-ip", "127.0.0.1", "--kubeconfig", c.Info.Kubeconfig, "--metrics-addr", ""}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{"--provider", "nope"}, `unknown provider "nope" (known: grpc, kubernetes, mock, slurm)`},
		{[]string{"--provider", "kubernetes"}, "provider kubernetes: --provider-config is required"},
		{[]string{"--provider", "kubernetes", "--provider-config", noRemote}, "provider kubernetes: provider config " + noRemote + ": remote: set remote.kubeconfig"},
		{[]string{"--provider", "kubernetes", "--provider-config", unreachable}, "provider kubernetes: remote cluster https://127.0.0.1:"},
		{[]string{"--provider", "kubernetes", "--provider-config", noKey}, "provider kubernetes: provider config " + noKey + ": signingKeyFile: required"},
		{[]string{"--provider", "mock", "--provider-config", filepath.Join(dir, "missing.json")}, "provider mock: provider config: open " + filepath.Join(dir, "missing.json")},
		{[]string{"--provider", "mock", "--provider-config", malformed}, `node "vk0": cpu: invalid quantity "eight"`},
		{[]string{"--provider", "mock", "--kubeconfig", filepath.Join(dir, "nope")}, "kubeconfig: stat " + filepath.Join(dir, "nope")},
		{[]string{"--provider", "mock", "--pod-sync-workers", "-3"}, "--pod-sync-workers must be at least 1"},
		{[]string{"--provider", "mock", "--startup-timeout", "forever"}, `invalid argument "forever" for "--startup-timeout"`},
		{[]string{"--provider", "mock", "--leader-elect", "--leader-elect-lease-duration", "10s"}, "--leader-elect-renew-deadline 10s plus --leader-elect-retry-period 2s must not exceed --leader-elect-lease-duration 10s"},
		{[]string{"--provider", "mock", "--leader-elect", "--leader-elect-resource-namespace", "no-such-namespace"}, "writing the replica lease no-such-namespace/vk-replica-"},
	}
	for _, tc := range cases {
		code, out := RunBinary(t, append(base, tc.args...)...)
		if code == 0 || strings.Contains(out, "\n") || !strings.Contains(out, tc.want) || strings.Contains(out, "panic") {
			t.Errorf("%v: exit %d, output:\n%s\nwant one line containing %q", tc.args, code, out, tc.want)
		}
	}
	// None of them got as far as registering the node.
	if _, err := c.Client.CoreV1().Nodes().Get(context.Background(), "vk0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node vk0 registered despite bad input: %v", err)
	}
}

func TestMetricsEndpoint(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freeport.Get(t))
	d := StartDaemon(t, c, nil, "--metrics-addr", addr, "--enable-profiling")
	WaitNodeReady(t, c.Client, d.Name)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "measured"},
		Spec:       corev1.PodSpec{NodeName: d.Name, Tolerations: Tolerate, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	WaitPod(t, c.Client, ns, "measured", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

	get := func(path string) string {
		resp, err := http.Get("http://" + addr + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, resp.Status)
		}
		return string(body)
	}
	var text string
	Eventually(t, "metrics", func() (bool, string) {
		text = get("/metrics")
		return strings.Contains(text, `virtual_kubelet_pods{phase="Running"} 1`), ""
	})
	for _, want := range []string{
		`workqueue_depth{name="syncPodsFromKubernetes"}`,
		`workqueue_adds_total{name="syncPodStatusFromProvider"}`,
		`workqueue_queue_duration_seconds_bucket{name="syncPodsFromKubernetes"`,
		`workqueue_work_duration_seconds_count{name="syncPodStatusFromProvider"}`,
		`workqueue_retries_total{name="deletePodsFromKubernetes"}`,
		`rest_client_requests_total{code="201",host=`,
		`rest_client_request_duration_seconds_bucket{host=`,
		`virtual_kubelet_provider_call_duration_seconds_count{method="CreatePod",result="success"} 1`,
	} {
		if !strings.Contains(text, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
	if got := get("/debug/pprof/"); !strings.Contains(got, "goroutine") {
		t.Errorf("/debug/pprof/ with --enable-profiling: %.200s", got)
	}
	if got := get("/healthz"); got != "ok" {
		t.Errorf("/healthz: %q", got)
	}
}
