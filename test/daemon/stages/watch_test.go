//go:build e2e

package stages_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// watchedObjects are kwok objects applied to the cluster: a Stage that
// does not compile, and a usage for the test's namespace.
const watchedObjects = `
apiVersion: kwok.x-k8s.io/v1alpha1
kind: Stage
metadata: {name: %[1]s-typo}
spec:
  resourceRef: {apiGroup: v1, kind: Pod}
  selectr: {}
---
apiVersion: kwok.x-k8s.io/v1alpha1
kind: ClusterResourceUsage
metadata: {name: %[1]s}
spec:
  selector: {matchNamespaces: [%[1]s]}
  usages:
  - usage:
      cpu: {value: 300m}
      memory: {value: 40Mi}
`

// TestWatchedStages: with kwok's CRDs installed (hack/deploy/kwok), the
// Stages and usage a user applies with kubectl after the daemon started
// run an unannotated Deployment and show in kubectl top; a Stage that does
// not compile is logged, named, and the others still run.
func TestWatchedStages(t *testing.T) {
	c := testcluster.MetricsServer(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	kubectl := func(args ...string) (string, error) {
		cctx, cancel := context.WithTimeout(ctx, 60*time.Second)
		defer cancel()
		return c.Kubectl(cctx, args...)
	}
	must := func(args ...string) {
		t.Helper()
		if out, err := kubectl(args...); err != nil {
			t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
		}
	}
	crds := filepath.Join("..", "..", "..", "hack", "deploy", "kwok", "crds.yaml")
	must("apply", "-f", crds)
	must("wait", "--for", "condition=Established", "-f", crds)
	stages := filepath.Join("..", "..", "..", "providers", "mock", "stages", "pod-fast.yaml")
	t.Cleanup(func() {
		// Stage names are the cluster's: leave none behind.
		_, _ = kubectl("delete", "--ignore-not-found", "-f", stages)
		_, _ = kubectl("delete", "--ignore-not-found", "stages.kwok.x-k8s.io/"+ns+"-typo", "clusterresourceusages.kwok.x-k8s.io/"+ns)
	})

	d := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")), "--watch-stages")
	daemontest.WaitNodeReady(t, c.Client, d.Name)

	must("apply", "-f", stages)
	objects := filepath.Join(t.TempDir(), "objects.yaml")
	if err := os.WriteFile(objects, []byte(fmt.Sprintf(watchedObjects, ns)), 0o600); err != nil {
		t.Fatal(err)
	}
	must("apply", "-f", objects)
	daemontest.Eventually(t, "the typo Stage logged, naming it and the field", func() (bool, string) {
		out := d.Output.String()
		return strings.Contains(out, fmt.Sprintf(`(stage \"%s-typo\"): unknown field \"spec.selectr\"`, ns)), ""
	})

	h := watchPods(t, c.Client, ns)
	dep := daemontest.DeploymentOn(d.Name, "fast", 2, nil, corev1.Container{Name: "app", Image: "nginx", Resources: corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")},
	}})
	if _, err := c.Client.AppsV1().Deployments(ns).Create(ctx, dep, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitAvailable(t, c.Client, ns, "fast", 2)
	for _, p := range podsOf(t, c.Client, ns, "app=fast") {
		// pod-fast's pod-ready gives the pod its IP with Running: the
		// mock's own lifecycle would not have waited in Pending.
		h.passedThrough(t, p.Name, []string{"Pending ip=false"}, []string{"Running ip=true init=True ready=True app=running"})
	}
	daemontest.Eventually(t, "kubectl top pod shows the ClusterResourceUsage", func() (bool, string) {
		out, err := kubectl("-n", ns, "top", "pod", "-l", "app=fast", "--no-headers")
		if err != nil {
			return false, out
		}
		lines := strings.Split(strings.TrimSpace(out), "\n")
		for _, line := range lines {
			if f := strings.Fields(line); len(f) != 3 || f[1] != "300m" || f[2] != "40Mi" {
				return false, out
			}
		}
		return len(lines) == 2, out
	})

	daemontest.CheckNoPanic(t, d)
}
