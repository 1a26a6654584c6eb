package api_test

import (
	"context"
	"errors"
	"sort"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

func parseMetrics(t *testing.T, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parsing the exposition: %v\n%s", err, text)
	}
	return families
}

// sample finds the sample of family name with exactly the given labels.
func sample(t *testing.T, families map[string]*dto.MetricFamily, name string, labels map[string]string) *dto.Metric {
	t.Helper()
	mf, ok := families[name]
	if !ok {
		t.Fatalf("no metric %s", name)
	}
	for _, m := range mf.Metric {
		got := map[string]string{}
		for _, l := range m.Label {
			got[l.GetName()] = l.GetValue()
		}
		if len(got) != len(labels) {
			continue
		}
		match := true
		for k, v := range labels {
			if got[k] != v {
				match = false
			}
		}
		if match {
			return m
		}
	}
	t.Fatalf("no sample of %s with labels %v", name, labels)
	return nil
}

func value(m *dto.Metric) float64 {
	switch {
	case m.Counter != nil:
		return m.Counter.GetValue()
	case m.Gauge != nil:
		return m.Gauge.GetValue()
	}
	return m.GetUntyped().GetValue()
}

func TestResourceMetrics(t *testing.T) {
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app", "sidecar"))
	h := api.PodHandler(f.config(), true)

	code, body := do(t, h, "GET", "/metrics/resource")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	families := parseMetrics(t, body)
	sampleMs := sampleTime.UnixMilli()
	startMs := startTime.UnixMilli()
	pod := map[string]string{"pod": "web", "namespace": "ns"}
	app := map[string]string{"container": "app", "pod": "web", "namespace": "ns"}
	sidecar := map[string]string{"container": "sidecar", "pod": "web", "namespace": "ns"}
	for _, c := range []struct {
		name   string
		labels map[string]string
		typ    dto.MetricType
		value  float64
		ts     int64
	}{
		{"scrape_error", nil, dto.MetricType_GAUGE, 0, 0},
		{"node_cpu_usage_seconds_total", nil, dto.MetricType_COUNTER, 12.5, sampleMs},
		{"node_memory_working_set_bytes", nil, dto.MetricType_GAUGE, 1 << 30, sampleMs},
		{"pod_cpu_usage_seconds_total", pod, dto.MetricType_COUNTER, 3, sampleMs},
		{"pod_memory_working_set_bytes", pod, dto.MetricType_GAUGE, 3 << 20, sampleMs},
		{"container_cpu_usage_seconds_total", app, dto.MetricType_COUNTER, 1, sampleMs},
		{"container_cpu_usage_seconds_total", sidecar, dto.MetricType_COUNTER, 2, sampleMs},
		{"container_memory_working_set_bytes", app, dto.MetricType_GAUGE, 1 << 20, sampleMs},
		{"container_memory_working_set_bytes", sidecar, dto.MetricType_GAUGE, 2 << 20, sampleMs},
		{"container_start_time_seconds", app, dto.MetricType_GAUGE, float64(startTime.UnixNano()) / 1e9, startMs},
	} {
		if got := families[c.name].GetType(); got != c.typ {
			t.Errorf("%s: type %v, want %v", c.name, got, c.typ)
		}
		m := sample(t, families, c.name, c.labels)
		if v := value(m); v != c.value {
			t.Errorf("%s%v = %v, want %v", c.name, c.labels, v, c.value)
		}
		if ts := m.GetTimestampMs(); ts != c.ts {
			t.Errorf("%s%v timestamp %d ms, want %d", c.name, c.labels, ts, c.ts)
		}
	}
	if _, ok := families["node_swap_usage_bytes"]; ok {
		t.Error("node_swap_usage_bytes without swap stats")
	}
	// The raw text carries the timestamps in milliseconds, as the kubelet's.
	if !strings.Contains(body, "node_cpu_usage_seconds_total 12.5 1778051289000") {
		t.Errorf("exposition:\n%s", body)
	}
}

func TestResourceMetricsScrapeError(t *testing.T) {
	f := newFakeProvider()
	f.summaryErr = errors.New("no stats")
	code, body := do(t, api.PodHandler(f.config(), true), "GET", "/metrics/resource")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	families := parseMetrics(t, body)
	if v := value(sample(t, families, "scrape_error", nil)); v != 1 {
		t.Errorf("scrape_error = %v, want 1", v)
	}
	if len(families) != 1 {
		t.Errorf("metrics besides scrape_error: %v", names(families))
	}
}

// TestResourceMetricsOddSummary: duplicates, missing figures and invalid
// label values cost the odd sample, not the scrape.
func TestResourceMetricsOddSummary(t *testing.T) {
	cpu := &statsv1alpha1.CPUStats{UsageCoreNanoSeconds: ptr.To[uint64](1e9)}
	summary := &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{CPU: &statsv1alpha1.CPUStats{}, Swap: &statsv1alpha1.SwapStats{SwapUsageBytes: ptr.To[uint64](5)}},
		Pods: []statsv1alpha1.PodStats{
			{PodRef: statsv1alpha1.PodReference{Name: "p", Namespace: "n"}, CPU: cpu, Containers: []statsv1alpha1.ContainerStats{{Name: "c", CPU: cpu}, {Name: "c", CPU: cpu}}},
			{PodRef: statsv1alpha1.PodReference{Name: "p", Namespace: "n"}, CPU: cpu},
			{PodRef: statsv1alpha1.PodReference{Name: "bad\xff", Namespace: "n"}, CPU: cpu},
			{PodRef: statsv1alpha1.PodReference{Name: "q", Namespace: "n"}},
		},
	}
	cfg := api.PodHandlerConfig{GetStatsSummary: func(context.Context) (*statsv1alpha1.Summary, error) { return summary, nil }}
	code, body := do(t, api.PodHandler(cfg, true), "GET", "/metrics/resource")
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	families := parseMetrics(t, body)
	if n := len(families["pod_cpu_usage_seconds_total"].GetMetric()); n != 1 {
		t.Errorf("pod_cpu_usage_seconds_total: %d samples, want 1:\n%s", n, body)
	}
	if n := len(families["container_cpu_usage_seconds_total"].GetMetric()); n != 1 {
		t.Errorf("container_cpu_usage_seconds_total: %d samples, want 1", n)
	}
	if _, ok := families["node_cpu_usage_seconds_total"]; ok {
		t.Error("node CPU without usage")
	}
	if v := value(sample(t, families, "node_swap_usage_bytes", nil)); v != 5 {
		t.Errorf("node_swap_usage_bytes = %v", v)
	}
	if got := sample(t, families, "pod_cpu_usage_seconds_total", map[string]string{"pod": "p", "namespace": "n"}); got.GetTimestampMs() != 0 {
		t.Errorf("a sample without a time has timestamp %d", got.GetTimestampMs())
	}
}

func names(families map[string]*dto.MetricFamily) []string {
	var out []string
	for n := range families {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
