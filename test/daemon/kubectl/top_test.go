//go:build e2e

package kubectl_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestKubectlTopAndHPA: a real metrics-server scrapes the daemon's
// /metrics/resource at the node's InternalIP with its kubelet client
// certificate; kubectl top shows the mock pods' scripted figures, a
// HorizontalPodAutoscaler reads their CPU utilisation, and metrics-server
// logs no trouble with the node.
func TestKubectlTopAndHPA(t *testing.T) { daemontest.ForEachTransport(t, testKubectlTopAndHPA) }

func testKubectlTopAndHPA(t *testing.T, via daemontest.Transport) {
	c := testcluster.MetricsServer(t)
	ctx := context.Background()
	logFile := c.Info.LogFile(controlplane.MetricsServer)
	logStart := fileSize(t, logFile)
	ns := c.Namespace(t)
	d := via.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")))
	daemontest.WaitNodeReady(t, c.Client, d.Name)

	kubectl := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return c.Kubectl(cctx, append([]string{"-n", ns}, args...)...)
	}

	// A pod of two containers, and a Deployment of two pods that request
	// 500m and use 200m: 40% of their request.
	pair := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "pair", Annotations: map[string]string{
			mock.AnnotationCPUUsage + ".main": "250m", mock.AnnotationMemoryUsage + ".main": "64Mi",
			mock.AnnotationCPUUsage + ".side": "50m", mock.AnnotationMemoryUsage + ".side": "16Mi",
		}},
		Spec: corev1.PodSpec{NodeName: d.Name, Tolerations: daemontest.Tolerate, Containers: []corev1.Container{
			{Name: "main", Image: "nginx"}, {Name: "side", Image: "busybox"},
		}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pair, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	dep := daemontest.DeploymentOn(d.Name, "busy", 2, map[string]string{mock.AnnotationCPUUsage: "200m", mock.AnnotationMemoryUsage: "32Mi"}, corev1.Container{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
	}})
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "all pods Running", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 3 && len(pods.Items) == 3, fmt.Sprintf("%d of %d running", running, len(pods.Items))
	})
	running := time.Now()

	// kubectl top pod: every pod with its figures; --containers for pair.
	var top map[string][2]string
	daemontest.Eventually(t, "kubectl top pod shows the scripted usage", func() (bool, string) {
		out, err := kubectl("top", "pod", "--no-headers")
		if err != nil {
			return false, out
		}
		top = columns(out)
		if len(top) != 3 || top["pair"] != [2]string{"300m", "80Mi"} {
			return false, out
		}
		for name, figures := range top {
			if name != "pair" && figures != [2]string{"200m", "32Mi"} {
				return false, out
			}
		}
		return true, out
	})
	visible := time.Now()
	out, err := kubectl("top", "pod", "pair", "--containers", "--no-headers")
	lines := map[string]bool{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		lines[strings.Join(strings.Fields(line), " ")] = true
	}
	if err != nil || len(lines) != 2 || !lines["pair main 250m 64Mi"] || !lines["pair side 50m 16Mi"] {
		t.Errorf("kubectl top pod pair --containers: %v\n%s", err, out)
	}
	// The scrape that made them visible: the sample's time in the metrics API.
	var podMetrics struct {
		Timestamp time.Time `json:"timestamp"`
		Window    string    `json:"window"`
	}
	raw, err := kubectl("get", "--raw", "/apis/metrics.k8s.io/v1beta1/namespaces/"+ns+"/pods/pair")
	if err != nil || json.Unmarshal([]byte(raw), &podMetrics) != nil {
		t.Fatalf("metrics API: %v %s", err, raw)
	}
	t.Logf("kubectl top pod: visible %s after the pods ran; sample at %s (window %s), %s before it was visible (resolution %s)",
		visible.Sub(running).Round(time.Millisecond), podMetrics.Timestamp.Format(time.RFC3339), podMetrics.Window,
		visible.Sub(podMetrics.Timestamp).Round(time.Millisecond), controlplane.MetricResolution)

	// kubectl top node: the pods' 700m and 144Mi, plus the daemon's own.
	daemontest.Eventually(t, "kubectl top node shows the node", func() (bool, string) {
		out, err := c.Kubectl(ctx, "top", "node", d.Name, "--no-headers")
		if err != nil {
			return false, out
		}
		f := strings.Fields(out)
		if len(f) < 4 || f[0] != d.Name {
			return false, out
		}
		cpu, err1 := resource.ParseQuantity(f[1])
		mem, err2 := resource.ParseQuantity(f[3])
		if err1 != nil || err2 != nil {
			return false, out
		}
		// Within a core and a GiB of the pods' figures: the rest is the
		// daemon itself.
		return cpu.MilliValue() >= 700 && cpu.MilliValue() < 1700 && mem.Value() >= 144<<20 && mem.Value() < 1168<<20, out
	})

	// A HorizontalPodAutoscaler reads the Deployment's CPU utilisation.
	hpa := daemontest.CPUAutoscaler("busy", 2, 4, 80)
	if _, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	hpaCreated := time.Now()
	daemontest.Eventually(t, "kubectl get hpa shows the CPU utilisation", func() (bool, string) {
		out, err := kubectl("get", "hpa", "busy", "--no-headers")
		return err == nil && strings.Contains(out, "cpu: 40%/80%"), out
	})
	got, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "busy", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if m := got.Status.CurrentMetrics; len(m) != 1 || m[0].Resource == nil || ptr.Deref(m[0].Resource.Current.AverageUtilization, 0) != 40 ||
		got.Status.CurrentReplicas != 2 {
		t.Errorf("HPA status: %+v", got.Status)
	}
	t.Logf("kubectl get hpa: utilisation shown %s after the HPA was created", time.Since(hpaCreated).Round(time.Millisecond))

	// metrics-server parsed every scrape of this node: no error naming it
	// or its pods, and no scrape of them short of a figure.
	for _, line := range linesFrom(t, logFile, logStart) {
		mentions := strings.Contains(line, d.Name) || strings.Contains(line, ns+"/")
		if mentions && (strings.HasPrefix(line, "E") || strings.Contains(line, "Failed getting complete")) {
			t.Errorf("metrics-server: %s", line)
		}
	}
}

// columns maps the first field of each line of kubectl's table to the next
// two.
func columns(out string) map[string][2]string {
	m := map[string][2]string{}
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		if f := strings.Fields(line); len(f) >= 3 {
			m[f[0]] = [2]string{f[1], f[2]}
		}
	}
	return m
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	st, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return st.Size()
}

// linesFrom returns the lines of the file from offset on.
func linesFrom(t *testing.T, path string, offset int64) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Seek(offset, 0); err != nil {
		t.Fatal(err)
	}
	var lines []string
	s := bufio.NewScanner(f)
	s.Buffer(make([]byte, 1<<20), 1<<20)
	for s.Scan() {
		lines = append(lines, s.Text())
	}
	return lines
}
