package api_test

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
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

// metricsRoutes serves /metrics/resource for a provider with summary get,
// both ways: written from the summary (no GetMetricsResource) and from the
// families MetricsResourceFromSummary builds.
func metricsRoutes(get api.PodStatsSummaryHandlerFunc) map[string]http.Handler {
	return map[string]http.Handler{
		"from the summary": api.PodHandler(api.PodHandlerConfig{GetStatsSummary: get}, false),
		"from families":    api.PodHandler(api.PodHandlerConfig{GetStatsSummary: get, GetMetricsResource: api.MetricsResourceFromSummary(get)}, false),
	}
}

func TestResourceMetrics(t *testing.T) {
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app", "sidecar"))
	for way, h := range metricsRoutes(f.GetStatsSummary) {
		t.Run(way, func(t *testing.T) { testResourceMetrics(t, h) })
	}
}

func testResourceMetrics(t *testing.T, h http.Handler) {
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", api.MetricsResourceRouteSuffix, nil))
	code, body := rec.Code, rec.Body.String()
	if code != 200 {
		t.Fatalf("%d %s", code, body)
	}
	if ct := rec.Header().Get("Content-Type"); ct != api.PrometheusTextFormatContentType {
		t.Errorf("Content-Type %q", ct)
	}
	families := parseMetrics(t, body)
	// The help as the kubelet's metrics library writes it.
	if help := families["node_cpu_usage_seconds_total"].GetHelp(); help != "[STABLE] Cumulative cpu time consumed by the node in core-seconds" {
		t.Errorf("help %q", help)
	}
	sampleMs := sampleTime.UnixMilli()
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
		{"resource_scrape_error", nil, dto.MetricType_GAUGE, 0, 0},
		{"node_cpu_usage_seconds_total", nil, dto.MetricType_COUNTER, 12.5, sampleMs},
		{"node_memory_working_set_bytes", nil, dto.MetricType_GAUGE, 1 << 30, sampleMs},
		{"pod_cpu_usage_seconds_total", pod, dto.MetricType_COUNTER, 3, sampleMs},
		{"pod_memory_working_set_bytes", pod, dto.MetricType_GAUGE, 3 << 20, sampleMs},
		{"container_cpu_usage_seconds_total", app, dto.MetricType_COUNTER, 1, sampleMs},
		{"container_cpu_usage_seconds_total", sidecar, dto.MetricType_COUNTER, 2, sampleMs},
		{"container_memory_working_set_bytes", app, dto.MetricType_GAUGE, 1 << 20, sampleMs},
		{"container_memory_working_set_bytes", sidecar, dto.MetricType_GAUGE, 2 << 20, sampleMs},
		// A start time is sent without a timestamp, as the kubelet does.
		{"container_start_time_seconds", app, dto.MetricType_GAUGE, float64(startTime.UnixNano()) / 1e9, 0},
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
	for way, h := range metricsRoutes(f.GetStatsSummary) {
		code, body := do(t, h, "GET", "/metrics/resource")
		if code != 200 {
			t.Fatalf("%s: %d %s", way, code, body)
		}
		families := parseMetrics(t, body)
		if v := value(sample(t, families, "resource_scrape_error", nil)); v != 1 {
			t.Errorf("%s: resource_scrape_error = %v, want 1", way, v)
		}
		if len(families) != 1 {
			t.Errorf("%s: metrics besides resource_scrape_error: %v", way, names(families))
		}
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
	get := func(context.Context) (*statsv1alpha1.Summary, error) { return summary, nil }
	for way, h := range metricsRoutes(get) {
		t.Run(way, func(t *testing.T) { testOddSummary(t, h) })
	}
}

func testOddSummary(t *testing.T, h http.Handler) {
	code, body := do(t, h, "GET", "/metrics/resource")
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

// TestResourceMetricsContainerSwap: the swap limit is usage plus what is
// available, as the kubelet computes it.
func TestResourceMetricsContainerSwap(t *testing.T) {
	swap := &statsv1alpha1.SwapStats{SwapUsageBytes: ptr.To[uint64](100), SwapAvailableBytes: ptr.To[uint64](900)}
	summary := &statsv1alpha1.Summary{Pods: []statsv1alpha1.PodStats{{
		PodRef:     statsv1alpha1.PodReference{Name: "p", Namespace: "n"},
		Containers: []statsv1alpha1.ContainerStats{{Name: "c", Swap: swap}},
	}}}
	families, err := api.MetricsResourceFromSummary(func(context.Context) (*statsv1alpha1.Summary, error) { return summary, nil })(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]*dto.MetricFamily{}
	for _, mf := range families {
		byName[mf.GetName()] = mf
	}
	c := map[string]string{"container": "c", "pod": "p", "namespace": "n"}
	if v := value(sample(t, byName, "container_swap_usage_bytes", c)); v != 100 {
		t.Errorf("container_swap_usage_bytes = %v", v)
	}
	if v := value(sample(t, byName, "container_swap_limit_bytes", c)); v != 1000 {
		t.Errorf("container_swap_limit_bytes = %v, want 1000", v)
	}
}

// TestHandlePodMetricsResource: a provider's own families are served as
// given; its errors and malformed families get an error status naming what
// is wrong, never a panic or a truncated exposition.
func TestHandlePodMetricsResource(t *testing.T) {
	gauge := func(name string, v float64) *dto.MetricFamily {
		return &dto.MetricFamily{Name: ptr.To(name), Type: dto.MetricType_GAUGE.Enum(),
			Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: ptr.To(v)}}}}
	}
	for _, c := range []struct {
		name     string
		families []*dto.MetricFamily
		err      error
		code     int
		want     string
	}{
		{"families", []*dto.MetricFamily{gauge("a", 1), {Name: ptr.To("empty"), Type: dto.MetricType_GAUGE.Enum()}, gauge("b", 2)}, nil, 200, "a 1\n# TYPE b gauge\nb 2\n"},
		{"none", nil, nil, 200, ""},
		{"not found", nil, errdefs.NotFound("no metrics yet"), 404, "no metrics yet"},
		{"failure", nil, errors.New("backend down"), 500, "backend down"},
		{"nil family", []*dto.MetricFamily{gauge("a", 1), nil}, nil, 500, "metric family 1 is nil"},
		{"nil metric", []*dto.MetricFamily{{Name: ptr.To("a"), Metric: []*dto.Metric{nil}}}, nil, 500, `metric family "a": metric 0 is nil`},
		{"twice", []*dto.MetricFamily{gauge("a", 1), gauge("a", 2)}, nil, 500, `metric family "a" is listed twice`},
		{"wrong type", []*dto.MetricFamily{{Name: ptr.To("a"), Type: dto.MetricType_COUNTER.Enum(), Metric: []*dto.Metric{{Gauge: &dto.Gauge{Value: ptr.To(1.0)}}}}}, nil, 500, `metric family "a"`},
	} {
		h := api.HandlePodMetricsResource(func(context.Context) ([]*dto.MetricFamily, error) { return c.families, c.err })
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", api.MetricsResourceRouteSuffix, nil))
		if rec.Code != c.code || !strings.Contains(rec.Body.String(), c.want) {
			t.Errorf("%s: %d %q, want %d with %q", c.name, rec.Code, rec.Body.String(), c.code, c.want)
		}
		if c.code == 200 && rec.Header().Get("Content-Type") != api.PrometheusTextFormatContentType {
			t.Errorf("%s: Content-Type %q", c.name, rec.Header().Get("Content-Type"))
		}
	}
}

// TestMetricsRoutes: the single-route handlers and AttachPodMetricsRoutes
// serve their paths, answer 404 elsewhere and 501 without a function.
func TestMetricsRoutes(t *testing.T) {
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app"))
	metrics := api.MetricsResourceFromSummary(f.GetStatsSummary)
	mux := http.NewServeMux()
	api.AttachPodMetricsRoutes(api.PodMetricsConfig{GetStatsSummary: f.GetStatsSummary, GetMetricsResource: metrics}, mux)
	summaryOnly, neither := http.NewServeMux(), http.NewServeMux()
	api.AttachPodMetricsRoutes(api.PodMetricsConfig{GetStatsSummary: f.GetStatsSummary}, summaryOnly)
	api.AttachPodMetricsRoutes(api.PodMetricsConfig{}, neither)
	for _, c := range []struct {
		name string
		h    http.Handler
		path string
		code int
		want string
	}{
		{"summary handler", api.PodStatsSummaryHandler(f.GetStatsSummary), "/stats/summary", 200, `"nodeName":"fake"`},
		{"summary handler elsewhere", api.PodStatsSummaryHandler(f.GetStatsSummary), "/metrics/resource", 404, ""},
		{"summary handler without function", api.PodStatsSummaryHandler(nil), "/stats/summary", 501, "stats summary is not implemented"},
		{"metrics handler", api.PodMetricsResourceHandler(metrics), "/metrics/resource", 200, `container_cpu_usage_seconds_total{container="app",namespace="ns",pod="web"} 1`},
		{"metrics handler elsewhere", api.PodMetricsResourceHandler(metrics), "/stats/summary", 404, ""},
		{"metrics handler without function", api.PodMetricsResourceHandler(nil), "/metrics/resource", 501, "resource metrics is not implemented"},
		{"attached summary", mux, "/stats/summary?only_cpu_and_memory=true", 200, `"workingSetBytes":1073741824`},
		{"attached metrics", mux, "/metrics/resource", 200, "node_memory_working_set_bytes 1.073741824e+09"},
		{"attached summary alone", summaryOnly, "/metrics/resource", 200, `container_cpu_usage_seconds_total{container="app",namespace="ns",pod="web"} 1`},
		{"summary-written handler", api.HandleMetricsResourceFromSummary(f.GetStatsSummary), "/metrics/resource", 200, "node_memory_working_set_bytes 1.073741824e+09"},
		{"summary-written handler without function", api.HandleMetricsResourceFromSummary(nil), "/metrics/resource", 501, "resource metrics is not implemented"},
		{"attached without either", neither, "/metrics/resource", 501, "resource metrics is not implemented"},
	} {
		code, body := do(t, c.h, "GET", c.path)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: GET %s = %d %q, want %d with %q", c.name, c.path, code, body, c.code, c.want)
		}
	}
	if code, _ := do(t, mux, "POST", "/metrics/resource"); code != http.StatusMethodNotAllowed {
		t.Errorf("POST /metrics/resource: %d", code)
	}
}

// TestResourceMetricsText: the exposition written from a summary, byte for
// byte as the kubelet's metrics library writes it: families in name order
// (those without samples left out), label values escaped, timestamps in
// milliseconds. Pods go by namespace and name and containers by name.
func TestResourceMetricsText(t *testing.T) {
	at := metav1.NewTime(time.UnixMilli(1778051289123))
	cpu := func(ns uint64) *statsv1alpha1.CPUStats {
		return &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: ptr.To(ns)}
	}
	summary := &statsv1alpha1.Summary{
		Node: statsv1alpha1.NodeStats{CPU: cpu(2_500_000_000)},
		Pods: []statsv1alpha1.PodStats{
			{PodRef: statsv1alpha1.PodReference{Name: "web", Namespace: "b"}, CPU: cpu(1e9),
				Containers: []statsv1alpha1.ContainerStats{{Name: "z", CPU: cpu(5e8)}, {Name: "a", CPU: cpu(25e7)}}},
			{PodRef: statsv1alpha1.PodReference{Name: "q\"uo\\te\n", Namespace: "a"}, CPU: cpu(0)},
		},
	}
	want := `# HELP container_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the container in core-seconds
# TYPE container_cpu_usage_seconds_total counter
container_cpu_usage_seconds_total{container="a",namespace="b",pod="web"} 0.25 1778051289123
container_cpu_usage_seconds_total{container="z",namespace="b",pod="web"} 0.5 1778051289123
# HELP node_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the node in core-seconds
# TYPE node_cpu_usage_seconds_total counter
node_cpu_usage_seconds_total 2.5 1778051289123
# HELP pod_cpu_usage_seconds_total [STABLE] Cumulative cpu time consumed by the pod in core-seconds
# TYPE pod_cpu_usage_seconds_total counter
pod_cpu_usage_seconds_total{namespace="a",pod="q\"uo\\te\n"} 0 1778051289123
pod_cpu_usage_seconds_total{namespace="b",pod="web"} 1 1778051289123
# HELP resource_scrape_error [STABLE] 1 if there was an error while getting container metrics, 0 otherwise
# TYPE resource_scrape_error gauge
resource_scrape_error 0
`
	get := func(context.Context) (*statsv1alpha1.Summary, error) { return summary, nil }
	for way, h := range metricsRoutes(get) {
		if code, body := do(t, h, "GET", "/metrics/resource"); code != 200 || body != want {
			t.Errorf("%s: %d\n%s\nwant\n%s", way, code, body, want)
		}
	}
}

// BenchmarkMetricsResource is a scrape of a node of 10 and of 10,000 pods
// of one container, both ways: what a scrape allocates, metrics-server adds
// to the daemon's heap every 15 s on each node.
func BenchmarkMetricsResource(b *testing.B) {
	at := metav1.NewTime(time.UnixMilli(1778051289123))
	for _, pods := range []int{10, 10000} {
		summary := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{CPU: &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: ptr.To[uint64](1)}}}
		for i := range pods {
			cpu := &statsv1alpha1.CPUStats{Time: at, UsageCoreNanoSeconds: ptr.To(uint64(i) * 1e6)}
			mem := &statsv1alpha1.MemoryStats{Time: at, WorkingSetBytes: ptr.To(uint64(i) << 10)}
			summary.Pods = append(summary.Pods, statsv1alpha1.PodStats{
				PodRef: statsv1alpha1.PodReference{Name: "pod-" + strconv.Itoa(i), Namespace: "bench"}, CPU: cpu, Memory: mem,
				Containers: []statsv1alpha1.ContainerStats{{Name: "app", StartTime: at, CPU: cpu, Memory: mem}},
			})
		}
		get := func(context.Context) (*statsv1alpha1.Summary, error) { return summary, nil }
		for _, way := range []string{"from the summary", "from families"} {
			h := metricsRoutes(get)[way]
			b.Run(fmt.Sprintf("pods=%d/%s", pods, way), func(b *testing.B) {
				b.ReportAllocs()
				req := httptest.NewRequest("GET", api.MetricsResourceRouteSuffix, nil)
				for b.Loop() {
					w := &discardingWriter{header: http.Header{}}
					h.ServeHTTP(w, req)
					if w.code != 0 || w.written < 100*pods {
						b.Fatalf("status %d, %d bytes", w.code, w.written)
					}
				}
			})
		}
	}
}

// discardingWriter is a ResponseWriter that counts the body and keeps none
// of it, as a connection to metrics-server does.
type discardingWriter struct {
	header  http.Header
	code    int
	written int
}

func (w *discardingWriter) Header() http.Header  { return w.header }
func (w *discardingWriter) WriteHeader(code int) { w.code = code }
func (w *discardingWriter) Write(b []byte) (int, error) {
	w.written += len(b)
	return len(b), nil
}
