//go:build e2e

package pods_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

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
	d := daemontest.Start(t, c, host, "--nodename", name, "--provider-config", cfg)
	node := daemontest.WaitNodeReady(t, c.Client, name)

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
	_, versionOut := daemontest.Run(t, "version")
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
	code, out := daemontest.Run(t, "providers")
	if code != 0 || out != "grpc\nkubernetes\nmock\nslurm" {
		t.Errorf("providers: %d %q", code, out)
	}
	code, out = daemontest.Run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "virtual-kubelet v") {
		t.Errorf("version: %d %q", code, out)
	}
}

func TestDeploymentRunsOnVirtualNode(t *testing.T) {
	daemontest.ForEachTransport(t, testDeploymentRunsOnVirtualNode)
	// The process's watch of all bound pods (which sees the other tests'
	// nodes' pods on the shared cluster) gives the node only its own.
	t.Run("shared-pod-watch", func(t *testing.T) {
		testDeploymentRunsOnVirtualNode(t, daemontest.Transport{Name: "in-process", Start: func(t *testing.T, c *testcluster.Cluster, host *nethost.Host, extra ...string) *daemontest.Daemon {
			return daemontest.Start(t, c, host, append(extra, "--shared-pod-watch")...)
		}})
	})
}

func testDeploymentRunsOnVirtualNode(t *testing.T, via daemontest.Transport) {
	c, ns, d := via.ReadyNode(t, true)
	ctx := context.Background()

	dep := daemontest.DeploymentOn(d.Name, "web", 20, nil, corev1.Container{Name: "web", Image: "nginx"})
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	selector := labels.SelectorFromSet(dep.Spec.Selector.MatchLabels).String()
	daemontest.Eventually(t, "20 pods Running on the virtual node", func() (bool, string) {
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
	daemontest.Eventually(t, "deployment available", func() (bool, string) {
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
	daemontest.Eventually(t, "pods drained", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{LabelSelector: selector})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items))
	})
}

func TestScriptedPods(t *testing.T) { daemontest.ForEachTransport(t, testScriptedPods) }

func testScriptedPods(t *testing.T, via daemontest.Transport) {
	c, ns, d := via.ReadyNode(t, false)
	ctx := context.Background()

	pod := func(name string, policy corev1.RestartPolicy, ann map[string]string) {
		p := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
			Spec: corev1.PodSpec{
				NodeName: d.Name, RestartPolicy: policy, Tolerations: daemontest.Tolerate,
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
	ok := daemontest.WaitPod(t, c.Client, ns, "succeeds", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if term := terminated(ok); term == nil || term.ExitCode != 0 || term.Reason != "Completed" {
		t.Errorf("succeeds: %+v", ok.Status.ContainerStatuses[0].State)
	}
	failed := daemontest.WaitPod(t, c.Client, ns, "fails", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if term := terminated(failed); term == nil || term.ExitCode != 3 || term.Reason != "Error" {
		t.Errorf("fails: %+v", failed.Status.ContainerStatuses[0].State)
	}
	restarted := daemontest.WaitPod(t, c.Client, ns, "restarts", "restarted 3 times", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount >= 3
	})
	if last := restarted.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != 2 {
		t.Errorf("restarts: last termination %+v", restarted.Status.ContainerStatuses[0].LastTerminationState)
	}
	if restarted.Status.Phase != corev1.PodRunning {
		t.Errorf("a restarting pod is Running, got %s", restarted.Status.Phase)
	}
	broken := daemontest.WaitPod(t, c.Client, ns, "cannot-start", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if term := terminated(broken); term == nil || term.Reason != "StartError" || term.ExitCode != 128 || term.Message != "image not found" {
		t.Errorf("cannot-start: %+v", broken.Status.ContainerStatuses[0].State)
	}
	rejected := daemontest.WaitPod(t, c.Client, ns, "bad-script", "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if rejected.Status.Reason != "ProviderRejected" || !strings.Contains(rejected.Status.Message, mock.AnnotationRunFor) {
		t.Errorf("bad-script: reason %q message %q", rejected.Status.Reason, rejected.Status.Message)
	}

	// Graceful deletion of everything drains the node.
	if err := c.Client.CoreV1().Pods(ns).DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "all pods gone", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items))
	})
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
	trust := "sourceCluster: a\nsigningKeyFile: " + daemontest.SigningKey(t) + "\n"
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
		code, out := daemontest.Run(t, append(base, tc.args...)...)
		if code == 0 || strings.Contains(out, "\n") || !strings.Contains(out, tc.want) || strings.Contains(out, "panic") {
			t.Errorf("%v: exit %d, output:\n%s\nwant one line containing %q", tc.args, code, out, tc.want)
		}
	}
	// None of them got as far as registering the node.
	if _, err := c.Client.CoreV1().Nodes().Get(context.Background(), "vk0", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("node vk0 registered despite bad input: %v", err)
	}
}
