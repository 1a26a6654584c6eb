//go:build e2e

package kubernetes_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	k8sprovider "github.com/vkubelet/virtual-kubelet/providers/kubernetes"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
	"github.com/vkubelet/virtual-kubelet/test/e2e"
)

// twoClusters is the kubernetes provider's setup: a virtual node in cluster
// A (the shared cluster) whose pods run in cluster B (a private one), where a
// mock virtual node stands for B's workers.
type twoClusters struct {
	t        *testing.T // the parent test: daemons live as long as it
	a, b     *testcluster.Cluster
	node     *daemontest.Daemon // the kubernetes provider's daemon, in a node host of A
	host     *nethost.Host      // its node host, for restarts
	config   string             // its --provider-config
	remoteNS string             // where the pods run in B
	ns       string             // the test's namespace in A
}

// startTwoClusters starts B, configured by configure, and the provider's
// daemon in A.
func startTwoClusters(t *testing.T, configure ...func(*controlplane.Config)) *twoClusters {
	t.Helper()
	return startTwoClustersWith(t, "", configure...)
}

// startTwoClustersWith is startTwoClusters with extra, YAML, at the end of
// the provider config.
func startTwoClustersWith(t *testing.T, extra string, configure ...func(*controlplane.Config)) *twoClusters {
	t.Helper()
	tc := &twoClusters{t: t, a: testcluster.Shared(t), b: testcluster.Private(t, configure...)}
	worker := daemontest.Start(t, tc.b, tc.b.AddHost(t, testcluster.UniqueName("w")))
	daemontest.WaitNodeReady(t, tc.b.Client, worker.Name)
	tc.remoteNS = tc.b.Namespace(t)
	tc.ns = tc.a.Namespace(t)

	// B's API server as a node host of A reaches it: its node network's
	// gateway, through the root namespace.
	tc.config = filepath.Join(t.TempDir(), "provider.yaml")
	cfg := fmt.Sprintf(`remote:
  kubeconfig: %s
  qps: 100
  burst: 200
namespace: %s
sourceCluster: a
signingKeyFile: %s
capacity: {cpu: "64", memory: 256Gi, pods: "2000"}
node:
  labels: {example.com/backend: cluster-b}
pods:
  tolerations: [{key: virtual-kubelet.io/provider, operator: Exists}]
`, tc.b.Info.NodeKubeconfig, tc.remoteNS, daemontest.SigningKey(t)) + extra
	if err := os.WriteFile(tc.config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	host := tc.a.AddHost(t, testcluster.UniqueName("h"))
	tc.host = host
	tc.node = daemontest.Start(t, tc.a, host, "--provider", "kubernetes", "--provider-config", tc.config)
	n := daemontest.WaitNodeReady(t, tc.a.Client, tc.node.Name)
	if n.Labels["example.com/backend"] != "cluster-b" || n.Status.Capacity.Pods().Value() != 2000 {
		t.Fatalf("node labels or capacity from the provider config: %v %v", n.Labels, n.Status.Capacity)
	}
	return tc
}

// kubectl runs A's kubectl in the test's namespace. Its minute covers a
// stall of B's API server: B shares the machine's two cores with A and the
// other e2e packages, and under that load it has failed /readyz for over
// 20 s in a row.
func (tc *twoClusters) kubectl(stdin string, args ...string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	cmd := tc.a.KubectlCommand(ctx, append([]string{"-n", tc.ns}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// remotePods lists this node's pods in B, keyed by A's name.
func (tc *twoClusters) remotePods(t *testing.T) map[string][]corev1.Pod {
	t.Helper()
	list, err := tc.b.Client.CoreV1().Pods(tc.remoteNS).List(context.Background(), metav1.ListOptions{
		LabelSelector: labels.SelectorFromSet(labels.Set{k8sprovider.LabelNode: tc.node.Name}).String(),
	})
	if err != nil {
		t.Fatal(err)
	}
	out := map[string][]corev1.Pod{}
	for _, p := range list.Items {
		name := p.Annotations[k8sprovider.AnnotationSourceName]
		out[name] = append(out[name], p)
	}
	return out
}

func (tc *twoClusters) pod(name string, containers ...corev1.Container) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec:       corev1.PodSpec{NodeName: tc.node.Name, Tolerations: daemontest.Tolerate, Containers: containers},
	}
}

func (tc *twoClusters) create(t *testing.T, pod *corev1.Pod) {
	t.Helper()
	if _, err := tc.a.Client.CoreV1().Pods(tc.ns).Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

func isRunning(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodRunning && p.Status.PodIP != ""
}

// TestKubernetesProvider runs a virtual node of A whose pods run in B, and
// drives it through A with kubectl: a Deployment, ConfigMaps and Secrets,
// the kubelet API, deletion, pods lost in B, an outage of B's API server and
// a restart of the daemon. The outage comes last: B takes a while to
// recover from it (its own node goes NotReady and is tainted).
func TestKubernetesProvider(t *testing.T) {
	// B runs metrics-server, for the stats of its pods.
	metricsServer, err := testcluster.MetricsServerBin()
	if err != nil {
		t.Fatal(err)
	}
	tc := startTwoClusters(t, func(cfg *controlplane.Config) { cfg.MetricsServerBin = metricsServer })
	ctx := context.Background()

	t.Run("deployment of 20 replicas runs in B", func(t *testing.T) {
		manifest := fmt.Sprintf(`apiVersion: apps/v1
kind: Deployment
metadata: {name: web}
spec:
  replicas: 20
  selector: {matchLabels: {app: web}}
  template:
    metadata: {labels: {app: web}}
    spec:
      nodeSelector: {kubernetes.io/hostname: %s}
      tolerations: [{key: virtual-kubelet.io/provider, operator: Exists}]
      containers: [{name: web, image: nginx}]
`, tc.node.Name)
		start := time.Now()
		if out, err := tc.kubectl(manifest, "apply", "-f", "-"); err != nil {
			t.Fatalf("kubectl apply: %v\n%s", err, out)
		}
		daemontest.Eventually(t, "20 pods Running in A with B's pod IPs", func() (bool, string) {
			pods, err := tc.a.Client.CoreV1().Pods(tc.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil {
				return false, err.Error()
			}
			remote := tc.remotePods(t)
			matched := 0
			for _, p := range pods.Items {
				r := remote[p.Name]
				if isRunning(&p) && len(r) == 1 && r[0].Status.PodIP == p.Status.PodIP && r[0].Labels[k8sprovider.LabelSourceUID] == string(p.UID) {
					matched++
				}
			}
			return matched == 20, fmt.Sprintf("%d of %d Running with B's IP", matched, len(pods.Items))
		})
		t.Logf("20 replicas Running through A→B in %s", time.Since(start).Round(10*time.Millisecond))

		// What B runs: no scheduling of A's, no token of A's.
		for _, rs := range tc.remotePods(t) {
			r := rs[0]
			if r.Spec.NodeSelector != nil || r.Spec.AutomountServiceAccountToken == nil || *r.Spec.AutomountServiceAccountToken {
				t.Errorf("remote pod %s: nodeSelector %v, automountServiceAccountToken %v", r.Name, r.Spec.NodeSelector, r.Spec.AutomountServiceAccountToken)
			}
			for _, v := range r.Spec.Volumes {
				if strings.HasPrefix(v.Name, "kube-api-access") {
					t.Errorf("remote pod %s mounts A's service account token volume %s", r.Name, v.Name)
				}
			}
			break
		}
	})

	t.Run("configmap and secret", func(t *testing.T) {
		if _, err := tc.a.Client.CoreV1().ConfigMaps(tc.ns).Create(ctx, &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "settings"}, Data: map[string]string{"color": "blue"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := tc.a.Client.CoreV1().Secrets(tc.ns).Create(ctx, &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: "creds"}, StringData: map[string]string{"password": "hunter2"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		credsRef := corev1.LocalObjectReference{Name: "creds"}
		pod := tc.pod("configured", corev1.Container{
			Name: "app", Image: "busybox",
			Env: []corev1.EnvVar{
				{Name: "COLOR", ValueFrom: &corev1.EnvVarSource{
					ConfigMapKeyRef: &corev1.ConfigMapKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}, Key: "color"}}},
				{Name: "PASSWORD", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: credsRef, Key: "password"}}},
				{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}},
			},
			EnvFrom:      []corev1.EnvFromSource{{Prefix: "S_", SecretRef: &corev1.SecretEnvSource{LocalObjectReference: credsRef}}},
			VolumeMounts: []corev1.VolumeMount{{Name: "settings", MountPath: "/etc/settings"}, {Name: "creds", MountPath: "/etc/creds"}},
		})
		pod.Spec.Volumes = []corev1.Volume{
			{Name: "settings", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "settings"}}}},
			{Name: "creds", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "creds"}}},
		}
		tc.create(t, pod)
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "configured", "Running", isRunning)
		// The env reaches the container in B: the ConfigMap and Secret ones
		// from the copies, the pod's name A's (B's pod has another).
		out, err := tc.kubectl("", "exec", "configured", "--", "printenv", "COLOR", "PASSWORD", "S_password", "POD_NAME")
		if err != nil || out != "blue\nhunter2\nhunter2\nconfigured\n" {
			t.Errorf("kubectl exec printenv: %v %q", err, out)
		}
		remote := tc.remotePods(t)["configured"][0]
		cmName, secretName := remote.Spec.Volumes[0].ConfigMap.Name, remote.Spec.Volumes[1].Secret.SecretName
		secret, err := tc.b.Client.CoreV1().Secrets(tc.remoteNS).Get(ctx, secretName, metav1.GetOptions{})
		if err != nil || string(secret.Data["password"]) != "hunter2" {
			t.Errorf("secret copy %s in B: %v %v", secretName, err, secret)
		}
		// B's pod refers to the copies: no Secret value in its spec.
		spec, err := json.Marshal(remote.Spec)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(spec), "hunter2") || strings.Contains(string(spec), "aHVudGVyMg") {
			t.Errorf("a Secret value is inline in B's pod spec: %s", spec)
		}
		env := map[string]corev1.EnvVar{} // A's service variables come first
		for _, v := range remote.Spec.Containers[0].Env {
			env[v.Name] = v
		}
		if from := remote.Spec.Containers[0].EnvFrom; env["COLOR"].ValueFrom.ConfigMapKeyRef.Name != cmName || env["PASSWORD"].ValueFrom.SecretKeyRef.Name != secretName ||
			from[0].SecretRef.Name != secretName || env["POD_NAME"].Value != "configured" || env["KUBERNETES_SERVICE_HOST"].Value == "" {
			t.Errorf("env of B's pod does not refer to the copies %s and %s: %+v %+v", cmName, secretName, env, from)
		}
		// Changes in A reach the copy in B.
		if _, err := tc.kubectl("", "patch", "configmap", "settings", "-p", `{"data":{"color":"green"}}`); err != nil {
			t.Fatal(err)
		}
		daemontest.Eventually(t, "configmap copy in B updated", func() (bool, string) {
			cm, err := tc.b.Client.CoreV1().ConfigMaps(tc.remoteNS).Get(ctx, cmName, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			return cm.Data["color"] == "green", fmt.Sprint(cm.Data)
		})

		// Once no pod of the node in B uses them, the copies go.
		if err := tc.a.Client.CoreV1().Pods(tc.ns).Delete(ctx, "configured", daemontest.DeleteNow); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		daemontest.Eventually(t, "copies deleted from B", func() (bool, string) {
			_, cmErr := tc.b.Client.CoreV1().ConfigMaps(tc.remoteNS).Get(ctx, cmName, metav1.GetOptions{})
			_, secretErr := tc.b.Client.CoreV1().Secrets(tc.remoteNS).Get(ctx, secretName, metav1.GetOptions{})
			return apierrors.IsNotFound(cmErr) && apierrors.IsNotFound(secretErr), fmt.Sprintf("configmap: %v, secret: %v", cmErr, secretErr)
		})
		t.Logf("copies deleted from B %s after their pod was deleted in A", time.Since(start).Round(100*time.Millisecond))
	})

	t.Run("logs exec port-forward", func(t *testing.T) {
		shell := tc.pod("shell", corev1.Container{Name: "app", Image: "busybox", Ports: []corev1.ContainerPort{{ContainerPort: 8080}}})
		shell.Annotations = map[string]string{mock.AnnotationCPUUsage: "250m", mock.AnnotationMemoryUsage: "64Mi"} // for B's mock node
		tc.create(t, shell)
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "shell", "Running", isRunning)
		remote := tc.remotePods(t)["shell"][0]
		prefix := remote.Namespace + "/" + remote.Name + "/app line " // the mock's log lines in B
		daemontest.Eventually(t, "two log lines", func() (bool, string) {
			out, err := tc.kubectl("", "logs", "shell", "--tail=2")
			lines := strings.Split(strings.TrimSpace(out), "\n")
			return err == nil && len(lines) == 2 && strings.HasPrefix(lines[0], prefix), out
		})
		if out, err := tc.kubectl("", "logs", "shell", "--since=1h", "--timestamps"); err != nil || !strings.Contains(out, prefix) {
			t.Errorf("kubectl logs --since --timestamps: %v %q", err, out)
		}
		fctx, stop := context.WithTimeout(ctx, 20*time.Second)
		defer stop()
		follow := tc.a.KubectlCommand(fctx, "-n", tc.ns, "logs", "-f", "--tail=0", "shell")
		stdout, _ := follow.StdoutPipe()
		if err := follow.Start(); err != nil {
			t.Fatal(err)
		}
		buf := make([]byte, len(prefix))
		if _, err := stdout.Read(buf); err != nil || !strings.HasPrefix(prefix, string(buf)) {
			t.Errorf("kubectl logs -f: no new line: %v %q", err, buf)
		}
		stop()
		_ = follow.Wait()
		if out, err := tc.kubectl("", "logs", "shell", "--previous"); err == nil {
			t.Errorf("kubectl logs --previous of a container that never restarted must fail: %q", out)
		}

		out, err := tc.kubectl("from stdin\n", "exec", "-i", "shell", "--", "cat")
		if err != nil || out != "from stdin\n" {
			t.Errorf("kubectl exec -i cat: %v %q", err, out)
		}
		out, err = tc.kubectl("", "exec", "shell", "--", "sh", "-c", "exit 42")
		var exitErr *exec.ExitError
		if !errors.As(err, &exitErr) || exitErr.ExitCode() != 42 {
			t.Errorf("kubectl exec exit 42: %v %q", err, out)
		}
		if echo, err := daemontest.PortForwardEcho(t, tc.a, tc.ns, "shell", 8080, "across clusters\n"); err != nil || echo != "across clusters\n" {
			t.Errorf("port-forward echo: %v %q", err, echo)
		}

		// Stats: B's mock node → B's metrics-server → this node's summary in
		// A (and, where A runs metrics-server, kubectl top in A).
		start := time.Now()
		daemontest.Eventually(t, "stats/summary in A with the usage of the pod in B", func() (bool, string) {
			out, err := tc.kubectl("", "get", "--raw", "/api/v1/nodes/"+tc.node.Name+"/proxy/stats/summary")
			var summary statsv1alpha1.Summary
			if err != nil || json.Unmarshal([]byte(out), &summary) != nil {
				return false, out
			}
			for _, p := range summary.Pods {
				if p.PodRef.Name == "shell" && p.PodRef.Namespace == tc.ns && p.CPU != nil && *p.CPU.UsageNanoCores == 250_000_000 &&
					*p.Memory.WorkingSetBytes == 64<<20 {
					return true, ""
				}
			}
			return false, out
		})
		t.Logf("stats of a pod in B visible in A's stats/summary %s after its logs were", time.Since(start).Round(100*time.Millisecond))
		if tc.a.Info.MetricsServer != "" {
			daemontest.Eventually(t, "kubectl top pod in A", func() (bool, string) {
				out, err := tc.kubectl("", "top", "pod", "shell", "--no-headers")
				return err == nil && strings.Join(strings.Fields(out), " ") == "shell 250m 64Mi", out
			})
			t.Logf("kubectl top pod in A %s after its logs were", time.Since(start).Round(100*time.Millisecond))
		}
	})

	t.Run("delete graceful and force", func(t *testing.T) {
		grace := int64(7)
		p := tc.pod("graceful", corev1.Container{Name: "app", Image: "busybox"})
		p.Spec.TerminationGracePeriodSeconds = &grace
		tc.create(t, p)
		tc.create(t, tc.pod("forced", corev1.Container{Name: "app", Image: "busybox"}))
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "graceful", "Running", isRunning)
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "forced", "Running", isRunning)

		seen := watchRemoteGrace(t, tc.b.Client, tc.remoteNS, tc.remotePods(t)["graceful"][0].Name)
		if out, err := tc.kubectl("", "delete", "pod", "graceful", "--grace-period=5", "--wait=false"); err != nil {
			t.Fatalf("kubectl delete: %v %s", err, out)
		}
		if out, err := tc.kubectl("", "delete", "pod", "forced", "--force", "--grace-period=0"); err != nil {
			t.Fatalf("kubectl delete --force: %v %s", err, out)
		}
		daemontest.Eventually(t, "both pods gone from A and B", func() (bool, string) {
			remote := tc.remotePods(t)
			_, errA := tc.a.Client.CoreV1().Pods(tc.ns).Get(ctx, "graceful", metav1.GetOptions{})
			return len(remote["graceful"])+len(remote["forced"]) == 0 && errA != nil, fmt.Sprintf("in B: %d graceful %d forced; A: %v", len(remote["graceful"]), len(remote["forced"]), errA)
		})
		if g := <-seen; g != 5 {
			t.Errorf("B's pod was deleted with grace %d, want A's 5", g)
		}
	})

	t.Run("pod deleted in B is lost, then restart policy decides", func(t *testing.T) {
		doomed := tc.pod("doomed", corev1.Container{Name: "app", Image: "busybox"})
		doomed.Spec.RestartPolicy = corev1.RestartPolicyNever
		tc.create(t, doomed)
		tc.create(t, tc.pod("reborn", corev1.Container{Name: "app", Image: "busybox"}))
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "doomed", "Running", isRunning)
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "reborn", "Running", isRunning)
		remote := tc.remotePods(t)
		for _, name := range []string{"doomed", "reborn"} {
			if err := tc.b.Client.CoreV1().Pods(tc.remoteNS).Delete(ctx, remote[name][0].Name, daemontest.DeleteNow); err != nil {
				t.Fatal(err)
			}
		}
		failed := daemontest.WaitPod(t, tc.a.Client, tc.ns, "doomed", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if failed.Status.Reason != "ProviderLost" {
			t.Errorf("restartPolicy Never: reason %q, want ProviderLost", failed.Status.Reason)
		}
		// restartPolicy Always: created again in B, the restart counted in A.
		daemontest.WaitPod(t, tc.a.Client, tc.ns, "reborn", "Running again with one restart", func(p *corev1.Pod) bool {
			return isRunning(p) && len(p.Status.ContainerStatuses) == 1 && p.Status.ContainerStatuses[0].RestartCount == 1
		})
		daemontest.Eventually(t, "reborn once in B, a new pod; doomed not created again", func() (bool, string) {
			now := tc.remotePods(t)
			return len(now["reborn"]) == 1 && now["reborn"][0].UID != remote["reborn"][0].UID && len(now["doomed"]) == 0,
				fmt.Sprintf("reborn %d, doomed %d in B", len(now["reborn"]), len(now["doomed"]))
		})
	})

	t.Run("conformance", func(t *testing.T) {
		e2e.NewEndToEndTestSuite(e2e.EndToEndTestSuiteConfig{
			RestConfig: tc.a.Config,
			Namespace:  tc.ns,
			NodeName:   tc.node.Name,
			// B's worker is a mock: its log lines end the container's path,
			// and metrics-server leaves out containers that used no CPU.
			WantLog:        func(string, string) string { return "/main line " },
			PodAnnotations: map[string]string{mock.AnnotationCPUUsage: "10m", mock.AnnotationMemoryUsage: "16Mi"},
			// B's mock echoes on the ports a container declares.
			EchoPort: 8080,
		}).Run(t)
	})

	t.Run("namespace per source namespace and derived capacity", func(t *testing.T) { tc.prefixNode(t) })

	t.Run("daemon killed and restarted", func(t *testing.T) {
		before := tc.remotePods(t)
		tc.node.Kill()
		// While it is down, a pod of A goes away for good: its pod in B is
		// an orphan the restarted daemon must remove.
		var victim string
		for name := range before {
			if strings.HasPrefix(name, "web-") {
				victim = name
				break
			}
		}
		if err := tc.a.Client.CoreV1().Pods(tc.ns).Delete(ctx, victim, daemontest.DeleteNow); err != nil {
			t.Fatal(err)
		}
		restarted := time.Now()
		tc.node = daemontest.Start(tc.t, tc.a, tc.host, "--provider", "kubernetes", "--provider-config", tc.config, "--nodename", tc.node.Name)
		daemontest.WaitNodeReady(t, tc.a.Client, tc.node.Name)
		daemontest.Eventually(t, "every pod of A once in B, the orphan gone", func() (bool, string) {
			pods, err := tc.a.Client.CoreV1().Pods(tc.ns).List(ctx, metav1.ListOptions{})
			if err != nil {
				return false, err.Error()
			}
			remote := tc.remotePods(t)
			var problems []string
			for _, p := range pods.Items {
				if p.Status.Phase == corev1.PodFailed {
					continue
				}
				if rs := remote[p.Name]; len(rs) != 1 || !isRunning(&p) {
					problems = append(problems, fmt.Sprintf("%s: %d in B, %s in A", p.Name, len(rs), p.Status.Phase))
				}
			}
			if len(remote[victim]) != 0 {
				problems = append(problems, "orphan "+victim+" still in B")
			}
			sort.Strings(problems)
			return len(problems) == 0, strings.Join(problems, "; ")
		})
		t.Logf("restarted daemon caught up in %s", time.Since(restarted).Round(10*time.Millisecond))
		after := tc.remotePods(t)
		for name, rs := range before {
			if name != victim && (len(after[name]) != 1 || after[name][0].UID != rs[0].UID) {
				t.Errorf("pod %s in B was not adopted as it was (%d now)", name, len(after[name]))
			}
		}
	})

	t.Run("B's API server stops and returns", func(t *testing.T) {
		daemontest.WaitNodeReady(t, tc.a.Client, tc.node.Name)
		before := tc.remotePods(t)
		cp := tc.b.ControlPlane(t)
		if err := cp.StopComponent(controlplane.APIServer); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		daemontest.EventuallyWithin(t, 3*time.Minute, "node NotReady while B is down", func() (bool, string) {
			ready, err := nodeReady(tc.a.Client, tc.node.Name)
			return err == nil && !ready, fmt.Sprintf("ready %v, %v", ready, err)
		})
		t.Logf("node NotReady %s after B's API server stopped", time.Since(start).Round(time.Second))
		// Meanwhile A moves on: a pod deleted, another created.
		if err := tc.a.Client.CoreV1().Pods(tc.ns).Delete(ctx, "shell", metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](1)}); err != nil {
			t.Fatal(err)
		}
		tc.create(t, tc.pod("during-outage", corev1.Container{Name: "app", Image: "busybox"}))
		if err := cp.StartComponent(ctx, controlplane.APIServer); err != nil {
			t.Fatal(err)
		}
		returned := time.Now()
		daemontest.WaitNodeReady(t, tc.a.Client, tc.node.Name)
		daemontest.EventuallyWithin(t, 3*time.Minute, "A and B reconciled: shell gone, during-outage Running with B's IP", func() (bool, string) {
			remote := tc.remotePods(t)
			_, errA := tc.a.Client.CoreV1().Pods(tc.ns).Get(ctx, "shell", metav1.GetOptions{})
			p, err := tc.a.Client.CoreV1().Pods(tc.ns).Get(ctx, "during-outage", metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			r := remote["during-outage"]
			return len(remote["shell"]) == 0 && apierrors.IsNotFound(errA) && isRunning(p) && len(r) == 1 && r[0].Status.PodIP == p.Status.PodIP,
				fmt.Sprintf("shell: %d in B, A: %v; during-outage: %d in B, %s in A", len(remote["shell"]), errA, len(r), p.Status.Phase)
		})
		t.Logf("A and B reconciled %s after B's API server returned", time.Since(returned).Round(100*time.Millisecond))
		after := tc.remotePods(t)
		delete(before, "shell")
		delete(after, "during-outage")
		if len(after) != len(before) {
			t.Errorf("pods in B: %d before the outage, %d after", len(before), len(after))
		}
		for name, rs := range before {
			if len(after[name]) != 1 || after[name][0].UID != rs[0].UID {
				t.Errorf("pod %s in B was lost or replaced in the outage", name)
			}
		}
		pods, err := tc.a.Client.CoreV1().Pods(tc.ns).List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range pods.Items {
			if !isRunning(&p) {
				t.Errorf("pod %s is %s after the outage", p.Name, p.Status.Phase)
			}
		}
	})
}

// prefixNode runs a second node of A on B with one namespace in B per
// source namespace and its capacity derived from B: pods of two namespaces
// of A land in prefix+namespace; the capacity is B's allocatable minus what
// runs there except the node's own pods, and follows a pod that is not.
func (tc *twoClusters) prefixNode(t *testing.T) {
	ctx := context.Background()
	config := filepath.Join(t.TempDir(), "prefix.yaml")
	cfg := fmt.Sprintf(`remote: {kubeconfig: %s}
namespacePrefix: p-
sourceCluster: a
signingKeyFile: %s
deriveCapacity: true
pods:
  tolerations: [{key: virtual-kubelet.io/provider, operator: Exists}]
`, tc.b.Info.NodeKubeconfig, daemontest.SigningKey(t))
	if err := os.WriteFile(config, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.Start(t, tc.a, tc.a.AddHost(t, testcluster.UniqueName("h")), "--provider", "kubernetes", "--provider-config", config)
	daemontest.WaitNodeReady(t, tc.a.Client, d.Name)

	// What the node should offer: B's allocatable pods minus B's bound,
	// unfinished pods that are not the node's.
	wantPods := func() (int64, error) {
		nodes, err := tc.b.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		pods, err := tc.b.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{})
		if err != nil {
			return 0, err
		}
		var free int64
		for _, n := range nodes.Items {
			if !n.Spec.Unschedulable {
				free += n.Status.Allocatable.Pods().Value()
			}
		}
		for _, p := range pods.Items {
			if p.Spec.NodeName != "" && p.Labels[k8sprovider.LabelNode] != d.Name && p.Status.Phase != corev1.PodSucceeded && p.Status.Phase != corev1.PodFailed {
				free--
			}
		}
		return free, nil
	}
	capacityIs := func(also func(int64) bool) func() (bool, string) {
		return func() (bool, string) {
			n, err := tc.a.Client.CoreV1().Nodes().Get(ctx, d.Name, metav1.GetOptions{})
			if err != nil {
				return false, err.Error()
			}
			want, err := wantPods()
			if err != nil {
				return false, err.Error()
			}
			got := n.Status.Capacity.Pods().Value()
			return got == want && also(got), fmt.Sprintf("capacity %d pods, B has room for %d", got, want)
		}
	}
	daemontest.Eventually(t, "derived capacity at registration", capacityIs(func(int64) bool { return true }))

	// Pods of two namespaces of A, each in prefix+namespace in B, which
	// enforces the provider's Pod Security level.
	namespaces := []string{tc.a.Namespace(t), tc.a.Namespace(t)}
	for _, ns := range namespaces {
		p := tc.pod("web", corev1.Container{Name: "app", Image: "busybox"})
		p.Spec.NodeName = d.Name
		if _, err := tc.a.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range namespaces {
		p := daemontest.WaitPod(t, tc.a.Client, ns, "web", "Running", isRunning)
		remoteName := "a." + d.Name + "." + ns + ".web"
		r, err := tc.b.Client.CoreV1().Pods("p-"+ns).Get(ctx, remoteName, metav1.GetOptions{})
		if err != nil || r.Status.PodIP != p.Status.PodIP || r.Labels[k8sprovider.LabelSourceUID] != string(p.UID) {
			t.Errorf("pod %s/web in B as p-%s/%s: %v %+v", ns, ns, remoteName, err, r)
		}
		bns, err := tc.b.Client.CoreV1().Namespaces().Get(ctx, "p-"+ns, metav1.GetOptions{})
		if err != nil || bns.Labels[k8sprovider.LabelSourceNamespace] != ns || bns.Labels["pod-security.kubernetes.io/enforce"] != "baseline" ||
			bns.Annotations[k8sprovider.AnnotationSignature] == "" {
			t.Errorf("namespace p-%s in B: %v %v", ns, err, bns)
		}
	}
	// The node's own pods do not shrink its capacity (A counts them).
	initial, err := tc.a.Client.CoreV1().Nodes().Get(ctx, d.Name, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "derived capacity with the node's own pods running", capacityIs(func(int64) bool { return true }))

	// A pod in B that is not the node's does, at the next refresh.
	workers, err := tc.b.Client.CoreV1().Nodes().List(ctx, metav1.ListOptions{})
	if err != nil || len(workers.Items) == 0 {
		t.Fatalf("B's nodes: %v", err)
	}
	outsider := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "outsider"},
		Spec: corev1.PodSpec{NodeName: workers.Items[0].Name, Tolerations: daemontest.Tolerate,
			Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
	}
	if _, err := tc.b.Client.CoreV1().Pods(tc.remoteNS).Create(ctx, outsider, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	before := initial.Status.Capacity.Pods().Value()
	daemontest.Eventually(t, "capacity down by B's new pod", capacityIs(func(got int64) bool { return got < before }))
	t.Logf("derived capacity followed a new pod in B in %s", time.Since(start).Round(100*time.Millisecond))

	// Leave neither pod behind in A or B.
	_ = tc.b.Client.CoreV1().Pods(tc.remoteNS).Delete(ctx, "outsider", daemontest.DeleteNow)
	for _, ns := range namespaces {
		if err := tc.a.Client.CoreV1().Pods(ns).Delete(ctx, "web", daemontest.DeleteNow); err != nil {
			t.Error(err)
		}
	}
	daemontest.Eventually(t, "the node's pods gone from B", func() (bool, string) {
		pods, err := tc.b.Client.CoreV1().Pods("").List(ctx, metav1.ListOptions{LabelSelector: k8sprovider.LabelNode + "=" + d.Name})
		if err != nil {
			return false, err.Error()
		}
		return len(pods.Items) == 0, fmt.Sprintf("%d left", len(pods.Items))
	})
}

// watchRemoteGrace reports the grace period B's pod name is deleted with.
func watchRemoteGrace(t *testing.T, client kubernetes.Interface, ns, name string) <-chan int64 {
	t.Helper()
	w, err := client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: "metadata.name=" + name})
	if err != nil {
		t.Fatal(err)
	}
	out := make(chan int64, 1)
	go func() {
		defer w.Stop()
		timeout := time.After(daemontest.Timeout)
		for {
			select {
			case ev, ok := <-w.ResultChan():
				if !ok {
					out <- -1
					return
				}
				if p, isPod := ev.Object.(*corev1.Pod); isPod && ev.Type != watch.Error && p.DeletionGracePeriodSeconds != nil {
					out <- *p.DeletionGracePeriodSeconds
					return
				}
			case <-timeout:
				out <- -1
				return
			}
		}
	}()
	return out
}

func nodeReady(client kubernetes.Interface, name string) (bool, error) {
	n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
	if err != nil {
		return false, err
	}
	for _, c := range n.Status.Conditions {
		if c.Type == corev1.NodeReady {
			return c.Status == corev1.ConditionTrue, nil
		}
	}
	return false, nil
}
