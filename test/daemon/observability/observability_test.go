//go:build e2e

package observability_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/internal/tracing/jaegertest"
)

func TestTracesReachJaeger(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	collector := jaegertest.NewCollector()
	defer collector.Close()
	d := daemontest.Start(t, c, nil, "--trace-exporter", "jaeger", "--jaeger-endpoint", collector.Endpoint(),
		"--trace-sample-rate", "always", "--trace-service-name", "vk-e2e", "--trace-tag", "env=test")
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "traced"},
		Spec:       corev1.PodSpec{NodeName: d.Name, Tolerations: daemontest.Tolerate, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitPod(t, c.Client, ns, "traced", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
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

func TestMetricsEndpoint(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	addr := fmt.Sprintf("127.0.0.1:%d", freeport.Get(t))
	d := daemontest.Start(t, c, nil, "--metrics-addr", addr, "--enable-profiling")
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	p := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "measured"},
		Spec:       corev1.PodSpec{NodeName: d.Name, Tolerations: daemontest.Tolerate, Containers: []corev1.Container{{Name: "main", Image: "busybox"}}},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitPod(t, c.Client, ns, "measured", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })

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
	daemontest.Eventually(t, "metrics", func() (bool, string) {
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
