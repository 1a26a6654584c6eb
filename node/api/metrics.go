package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// MetricsResourceRouteSuffix is the path of the kubelet's resource metrics,
// which metrics-server scrapes for `kubectl top` and the
// HorizontalPodAutoscaler.
const MetricsResourceRouteSuffix = "/metrics/resource"

// PrometheusTextFormatContentType is the Content-Type of /metrics/resource:
// the Prometheus text exposition format.
const PrometheusTextFormatContentType = "text/plain; version=0.0.4"

// PodMetricsResourceHandlerFunc returns the metric families /metrics/resource
// serves. A provider that has a stats summary builds them with
// MetricsResourceFromSummary.
type PodMetricsResourceHandlerFunc func(context.Context) ([]*dto.MetricFamily, error)

// PodMetricsConfig holds the provider's functions behind the node's metrics
// routes. A nil function makes its route answer 501 Not Implemented.
type PodMetricsConfig struct {
	// GetStatsSummary serves /stats/summary.
	GetStatsSummary PodStatsSummaryHandlerFunc
	// GetMetricsResource serves /metrics/resource.
	GetMetricsResource PodMetricsResourceHandlerFunc
}

// AttachPodMetricsRoutes registers GET /stats/summary and GET
// /metrics/resource on mux. AttachPodRoutes includes them; this is for a
// server that serves the metrics routes on their own.
func AttachPodMetricsRoutes(p PodMetricsConfig, mux ServeMux) {
	mux.Handle("GET /stats/summary", HandlePodStatsSummary(p.GetStatsSummary))
	mux.Handle("GET "+MetricsResourceRouteSuffix, HandlePodMetricsResource(p.GetMetricsResource))
}

// PodMetricsResourceHandler returns a handler that serves GET
// /metrics/resource from f and 404 for any other path.
func PodMetricsResourceHandler(f PodMetricsResourceHandlerFunc) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET "+MetricsResourceRouteSuffix, HandlePodMetricsResource(f))
	return mux
}

// HandlePodMetricsResource returns the handler of /metrics/resource: h's
// metric families in the Prometheus text format. An error of h answers with
// its status (see the package doc); a nil family or metric answers 500
// naming it; a nil h answers 501.
func HandlePodMetricsResource(h PodMetricsResourceHandlerFunc) http.HandlerFunc {
	if h == nil {
		return func(w http.ResponseWriter, _ *http.Request) { notImplemented(w, "resource metrics") }
	}
	return func(w http.ResponseWriter, r *http.Request) {
		families, err := h(r.Context())
		if err != nil {
			writeError(r.Context(), w, err)
			return
		}
		// Encoded whole before anything is sent, so that a bad family
		// makes an error status rather than a truncated exposition.
		var buf bytes.Buffer
		if err := encodeText(&buf, families); err != nil {
			writeError(r.Context(), w, fmt.Errorf("encoding the provider's resource metrics: %w", err))
			return
		}
		w.Header().Set("Content-Type", PrometheusTextFormatContentType)
		_, _ = w.Write(buf.Bytes())
	}
}

// encodeText writes families in the text format. A family without samples is
// left out (the encoder rejects it); a nil family or metric, or two families
// of one name, is an error naming it.
func encodeText(buf *bytes.Buffer, families []*dto.MetricFamily) error {
	seen := make(map[string]bool, len(families))
	for i, mf := range families {
		if mf == nil {
			return fmt.Errorf("metric family %d is nil", i)
		}
		if seen[mf.GetName()] {
			return fmt.Errorf("metric family %q is listed twice", mf.GetName())
		}
		seen[mf.GetName()] = true
		if len(mf.Metric) == 0 {
			continue
		}
		for j, m := range mf.Metric {
			if m == nil {
				return fmt.Errorf("metric family %q: metric %d is nil", mf.GetName(), j)
			}
		}
		if _, err := expfmt.MetricFamilyToText(buf, mf); err != nil {
			return fmt.Errorf("metric family %q: %w", mf.GetName(), err)
		}
	}
	return nil
}

// MetricsResourceFromSummary returns a PodMetricsResourceHandlerFunc that
// builds the families of /metrics/resource from the summary f returns, as
// the kubelet does: the same names, help, labels and units, each sample
// stamped with the time of its figure. A provider with a stats summary
// serves its resource metrics in one line:
//
//	cfg.GetMetricsResource = api.MetricsResourceFromSummary(p.GetStatsSummary)
//
// When f fails, the families hold resource_scrape_error 1 (0 otherwise) and
// the error is logged, as the kubelet answers a scrape it cannot fill.
func MetricsResourceFromSummary(f PodStatsSummaryHandlerFunc) PodMetricsResourceHandlerFunc {
	return func(ctx context.Context) ([]*dto.MetricFamily, error) {
		summary, err := f(ctx)
		if err != nil {
			log.G(ctx).WithError(err).Warn("kubelet API: cannot get the stats summary for /metrics/resource")
		}
		reg := prometheus.NewRegistry()
		if err := reg.Register(&summaryCollector{summary: summary, err: err}); err != nil {
			return nil, err
		}
		families, err := reg.Gather()
		if err != nil {
			// Gather returns what it could; the kubelet would not fail a
			// whole scrape over one sample either.
			log.G(ctx).WithError(err).Warn("kubelet API: some resource metrics were left out")
		}
		return families, nil
	}
}

// The metrics of /metrics/resource as the kubelet (v1.36) serves them: the
// names metrics-server reads, and the help of each with its stability level
// in front, as the kubelet's metrics library writes it.
var (
	containerLabels = []string{"container", "pod", "namespace"}
	podLabels       = []string{"pod", "namespace"}

	nodeCPUUsageDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the node in core-seconds", nil, nil)
	nodeMemoryWorkingSetDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"[STABLE] Current working set of the node in bytes", nil, nil)
	nodeSwapUsageDesc = prometheus.NewDesc("node_swap_usage_bytes",
		"[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems", nil, nil)
	containerCPUUsageDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the container in core-seconds", containerLabels, nil)
	containerMemoryWorkingSetDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"[STABLE] Current working set of the container in bytes", containerLabels, nil)
	containerSwapUsageDesc = prometheus.NewDesc("container_swap_usage_bytes",
		"[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems", containerLabels, nil)
	containerSwapLimitDesc = prometheus.NewDesc("container_swap_limit_bytes",
		"[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems", containerLabels, nil)
	containerStartTimeDesc = prometheus.NewDesc("container_start_time_seconds",
		"[STABLE] Start time of the container since unix epoch in seconds", containerLabels, nil)
	podCPUUsageDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"[STABLE] Cumulative cpu time consumed by the pod in core-seconds", podLabels, nil)
	podMemoryWorkingSetDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"[STABLE] Current working set of the pod in bytes", podLabels, nil)
	podSwapUsageDesc = prometheus.NewDesc("pod_swap_usage_bytes",
		"[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems", podLabels, nil)
	// The kubelet also had scrape_error, deprecated in 1.29 and hidden since.
	scrapeErrorDesc = prometheus.NewDesc("resource_scrape_error",
		"[STABLE] 1 if there was an error while getting container metrics, 0 otherwise", nil, nil)
)

// summaryCollector is a prometheus.Collector over one stats summary.
type summaryCollector struct {
	summary *statsv1alpha1.Summary
	err     error
}

func (c *summaryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		nodeCPUUsageDesc, nodeMemoryWorkingSetDesc, nodeSwapUsageDesc,
		containerCPUUsageDesc, containerMemoryWorkingSetDesc, containerSwapUsageDesc, containerSwapLimitDesc,
		containerStartTimeDesc,
		podCPUUsageDesc, podMemoryWorkingSetDesc, podSwapUsageDesc,
		scrapeErrorDesc,
	} {
		ch <- d
	}
}

func (c *summaryCollector) Collect(ch chan<- prometheus.Metric) {
	if c.err != nil {
		emit(ch, scrapeErrorDesc, prometheus.GaugeValue, 1, time.Time{})
		return
	}
	emit(ch, scrapeErrorDesc, prometheus.GaugeValue, 0, time.Time{})
	if c.summary == nil {
		return
	}
	n := &c.summary.Node
	emitCPU(ch, nodeCPUUsageDesc, n.CPU)
	emitMemory(ch, nodeMemoryWorkingSetDesc, n.Memory)
	emitSwap(ch, nodeSwapUsageDesc, n.Swap)

	// A summary listing a pod or container twice would make the registry
	// reject the whole scrape: keep the first.
	seenPods := map[statsv1alpha1.PodReference]bool{}
	for i := range c.summary.Pods {
		p := &c.summary.Pods[i]
		ref := statsv1alpha1.PodReference{Namespace: p.PodRef.Namespace, Name: p.PodRef.Name}
		if seenPods[ref] {
			continue
		}
		seenPods[ref] = true
		emitCPU(ch, podCPUUsageDesc, p.CPU, ref.Name, ref.Namespace)
		emitMemory(ch, podMemoryWorkingSetDesc, p.Memory, ref.Name, ref.Namespace)
		emitSwap(ch, podSwapUsageDesc, p.Swap, ref.Name, ref.Namespace)

		seenContainers := map[string]bool{}
		for j := range p.Containers {
			ct := &p.Containers[j]
			if seenContainers[ct.Name] {
				continue
			}
			seenContainers[ct.Name] = true
			labels := []string{ct.Name, ref.Name, ref.Namespace}
			emitCPU(ch, containerCPUUsageDesc, ct.CPU, labels...)
			emitMemory(ch, containerMemoryWorkingSetDesc, ct.Memory, labels...)
			emitSwap(ch, containerSwapUsageDesc, ct.Swap, labels...)
			if s := ct.Swap; s != nil && s.SwapAvailableBytes != nil {
				// The limit is what is used plus what is left.
				limit := float64(*s.SwapAvailableBytes)
				if s.SwapUsageBytes != nil {
					limit += float64(*s.SwapUsageBytes)
				}
				emit(ch, containerSwapLimitDesc, prometheus.GaugeValue, limit, s.Time.Time, labels...)
			}
			// The start time is a fact about the past, not a sample: the
			// kubelet sends it without a timestamp.
			if st := ct.StartTime.Time; st.Unix() > 0 {
				emit(ch, containerStartTimeDesc, prometheus.GaugeValue, float64(st.UnixNano())/float64(time.Second), time.Time{}, labels...)
			}
		}
	}
}

func emitCPU(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsv1alpha1.CPUStats, labels ...string) {
	if s == nil || s.UsageCoreNanoSeconds == nil {
		return
	}
	emit(ch, d, prometheus.CounterValue, float64(*s.UsageCoreNanoSeconds)/float64(time.Second), s.Time.Time, labels...)
}

func emitMemory(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsv1alpha1.MemoryStats, labels ...string) {
	if s == nil || s.WorkingSetBytes == nil {
		return
	}
	emit(ch, d, prometheus.GaugeValue, float64(*s.WorkingSetBytes), s.Time.Time, labels...)
}

func emitSwap(ch chan<- prometheus.Metric, d *prometheus.Desc, s *statsv1alpha1.SwapStats, labels ...string) {
	if s == nil || s.SwapUsageBytes == nil {
		return
	}
	emit(ch, d, prometheus.GaugeValue, float64(*s.SwapUsageBytes), s.Time.Time, labels...)
}

// emit sends a metric, with the time of its sample if known (the text
// format carries it in milliseconds). A metric the client library rejects,
// such as one with a label value that is not UTF-8, is left out.
func emit(ch chan<- prometheus.Metric, d *prometheus.Desc, t prometheus.ValueType, v float64, at time.Time, labels ...string) {
	m, err := prometheus.NewConstMetric(d, t, v, labels...)
	if err != nil {
		return
	}
	if !at.IsZero() {
		m = prometheus.NewMetricWithTimestamp(at, m)
	}
	ch <- m
}
