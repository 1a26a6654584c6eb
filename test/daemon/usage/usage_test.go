//go:build e2e

package usage_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// usageFile is a stage file of kwok's usage kinds for the namespace ns:
// "spin" gives the pod named spin a CPU expression far over the cost
// limit (nested loops, 10^5 steps); "by-app" gives every other pod of ns
// its CPU from its app label and the time it has run, and 48Mi.
func usageFile(ns string) string {
	return fmt.Sprintf(`apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata:
  name: spin
spec:
  selector:
    matchNames: [spin]
  usages:
  - usage:
      cpu:
        expression: >-
          [0,1,2,3,4,5,6,7,8,9].map(a, [0,1,2,3,4,5,6,7,8,9].map(b,
          [0,1,2,3,4,5,6,7,8,9].map(c, [0,1,2,3,4,5,6,7,8,9].map(d,
          [0,1,2,3,4,5,6,7,8,9].map(e, a))))).size()
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata:
  name: by-app
spec:
  selector:
    matchNamespaces: [%s]
  usages:
  - usage:
      cpu:
        expression: |
          pod.metadata.labels["app"] == "busy" && pod.SinceSecond() >= 0.0
          ? Quantity("400m")
          : Quantity("10m")
      memory:
        expression: Quantity("48Mi")
`, ns)
}

// TestUsageExpressions: a ClusterResourceUsage's CEL expression gives the
// CPU and memory of a Deployment of unannotated pods: kubectl top pod
// shows them, and an HPA with a CPU utilisation target scales the
// Deployment up. An expression over the cost limit is cut off with a
// Warning Event on its pod, whose stats stay served.
func TestUsageExpressions(t *testing.T) {
	c := testcluster.MetricsServer(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	path := filepath.Join(t.TempDir(), "usage.yaml")
	if err := os.WriteFile(path, []byte(usageFile(ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	d := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")), "--stage-config", path)
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	kubectl := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		return c.Kubectl(cctx, append([]string{"-n", ns}, args...)...)
	}

	// Two pods requesting 500m, which the expression makes use 400m: 80%
	// of their request, over the HPA's 50%.
	dep := daemontest.DeploymentOn(d.Name, "busy", 2, nil, corev1.Container{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
	}})
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	spin := daemontest.MockPod("spin", d.Name, corev1.RestartPolicyAlways, nil)
	daemontest.CreatePods(t, c.Client, ns, spin)
	daemontest.Eventually(t, "all pods Running", func() (bool, string) {
		pods, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		running := 0
		for _, p := range pods.Items {
			if len(p.Annotations) > 0 {
				t.Fatalf("pod %s has annotations %v: the test is of unannotated pods", p.Name, p.Annotations)
			}
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		return running == 3 && len(pods.Items) == 3, fmt.Sprintf("%d of %d running", running, len(pods.Items))
	})

	daemontest.Eventually(t, "kubectl top pod shows the expression's usage", func() (bool, string) {
		out, err := kubectl("top", "pod", "-l", "app=busy", "--no-headers")
		if err != nil {
			return false, out
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, line := range lines {
			if f := strings.Fields(line); len(f) != 3 || f[1] != "400m" || f[2] != "48Mi" {
				return false, out
			}
		}
		return len(lines) == 2, out
	})

	// The HPA reads 80% against its 50% and scales the Deployment to 4.
	hpa := daemontest.CPUAutoscaler("busy", 2, 4, 50)
	if _, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Create(ctx, hpa, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "the HPA scales the Deployment up to 4", func() (bool, string) {
		got, err := c.Client.AutoscalingV2().HorizontalPodAutoscalers(ns).Get(ctx, "busy", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		dep, err := c.Client.AppsV1().Deployments(ns).Get(ctx, "busy", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return got.Status.DesiredReplicas == 4 && ptr.Deref(dep.Spec.Replicas, 0) == 4 && dep.Status.ReadyReplicas == 4,
			fmt.Sprintf("HPA %+v; Deployment %d replicas, %d ready", got.Status, ptr.Deref(dep.Spec.Replicas, 0), dep.Status.ReadyReplicas)
	})
	daemontest.Eventually(t, "kubectl top pod shows the new pods' usage too", func() (bool, string) {
		out, err := kubectl("top", "pod", "-l", "app=busy", "--no-headers")
		return err == nil && strings.Count(out, " 400m ") == 4, out
	})

	// The expression over the cost limit: a Warning on spin naming the
	// object and the limit...
	daemontest.Eventually(t, "a Warning Event on spin", func() (bool, string) {
		events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=spin,reason=" + mock.ReasonUsageCostLimit})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, "ClusterResourceUsage spin") && strings.Contains(e.Message, "cost limit 100000") {
				return true, e.Message
			}
		}
		return false, fmt.Sprintf("%d events", len(events.Items))
	})
	// ...and its stats still served, CPU at the fallback (zero: it has no
	// annotation), memory from the expression that works.
	var summary statsv1alpha1.Summary
	raw, err := kubectl("get", "--raw", "/api/v1/nodes/"+d.Name+"/proxy/stats/summary")
	if err != nil || json.Unmarshal([]byte(raw), &summary) != nil {
		t.Fatalf("stats summary: %v %s", err, raw)
	}
	found := false
	for _, p := range summary.Pods {
		if p.PodRef.Namespace != ns || p.PodRef.Name != "spin" {
			continue
		}
		found = true
		if len(p.Containers) != 1 || *p.Containers[0].CPU.UsageNanoCores != 0 || *p.Containers[0].Memory.WorkingSetBytes != 48<<20 {
			t.Errorf("spin's stats: %+v", p.Containers)
		}
	}
	if !found {
		t.Errorf("no stats of spin: %s", raw)
	}
	daemontest.CheckNoPanic(t, d)
}
