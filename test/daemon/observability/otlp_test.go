//go:build e2e

package observability_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/internal/tracing/otlptest"
)

// TestTracesReachOTLPReceiver: with --trace-exporter otlp and the standard
// OTEL_EXPORTER_OTLP_* variables pointing at an OTLP/gRPC receiver, the
// spans of a pod's creation and deletion arrive, each provider call a child
// of the queue item span of that pod, in the same trace.
func TestTracesReachOTLPReceiver(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	r, err := otlptest.NewGRPC()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// The daemon inherits the test's environment.
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.Endpoint())
	t.Setenv("OTEL_BSP_SCHEDULE_DELAY", "200") // ms between batches, not 5 s
	d := daemontest.Start(t, c, nil, "--trace-exporter", "otlp", "--trace-sample-rate", "always", "--trace-service-name", "vk-otlp")
	daemontest.WaitNodeReady(t, c.Client, d.Name)

	daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod("traced", d.Name, corev1.RestartPolicyAlways, nil))
	uid := daemontest.WaitPod(t, c.Client, ns, "traced", "Running", daemontest.Running).UID
	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "traced", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.Eventually(t, "pod gone", daemontest.PodGone(c.Client, ns, "traced", uid))

	key := ns + "/traced"
	daemontest.Eventually(t, "provider.CreatePod and provider.DeletePod spans of "+key+" under their queue spans", func() (bool, string) {
		spans := r.Spans()
		byID := map[string]otlptest.Span{}
		for _, s := range spans {
			byID[s.SpanID] = s
		}
		found := map[string]string{} // provider span -> its parent's name
		for _, s := range spans {
			if s.Name != "provider.CreatePod" && s.Name != "provider.DeletePod" {
				continue
			}
			if s.Resource["service.name"] != "vk-otlp" {
				return false, fmt.Sprintf("span %s from service %q", s.Name, s.Resource["service.name"])
			}
			parent, ok := byID[s.ParentID]
			if ok && parent.TraceID == s.TraceID && parent.Attributes["key"] == key {
				found[s.Name] = parent.Name
			}
		}
		return len(found) == 2, fmt.Sprintf("%d spans received; linked provider spans of %s: %v", len(spans), key, found)
	})
	if code, _ := d.Shutdown(t); code != 0 {
		t.Fatalf("exit code %d", code)
	}
	seen := map[string]bool{}
	for _, s := range r.Spans() {
		seen[s.Name] = true
	}
	// The names the Jaeger test sees.
	for _, want := range []string{"syncPodsFromKubernetes", "syncPodStatusFromProvider", "node.register"} {
		if !seen[want] {
			t.Errorf("no %q span among %v", want, seen)
		}
	}
}
