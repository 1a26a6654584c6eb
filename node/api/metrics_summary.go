package api

import (
	"cmp"
	"context"
	"io"
	"net/http"
	"slices"
	"strconv"
	"time"
	"unicode/utf8"

	dto "github.com/prometheus/client_model/go"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// HandleMetricsResourceFromSummary returns the handler of /metrics/resource
// for a provider whose resource metrics are its stats summary: the summary
// f returns, written in the kubelet's text format one sample at a time. A
// scrape of 10,000 pods then holds the summary and a write buffer, where
// metric families would hold every sample twice more and the whole
// exposition. When f fails, the exposition is resource_scrape_error 1 and
// the error is logged, as the kubelet answers a scrape it cannot fill. A nil
// f answers 501.
func HandleMetricsResourceFromSummary(f PodStatsSummaryHandlerFunc) http.HandlerFunc {
	if f == nil {
		return func(w http.ResponseWriter, _ *http.Request) { notImplemented(w, "resource metrics") }
	}
	return func(w http.ResponseWriter, r *http.Request) {
		summary, err := summaryForMetrics(r.Context(), f)
		w.Header().Set("Content-Type", PrometheusTextFormatContentType)
		// Nothing in a summary can fail the exposition half way: only the
		// client going away can, and then no one reads the rest.
		_ = writeResourceMetrics(w, summary, err)
	}
}

// summaryForMetrics returns f's summary, logging its error, which the
// exposition reports as resource_scrape_error.
func summaryForMetrics(ctx context.Context, f PodStatsSummaryHandlerFunc) (*statsv1alpha1.Summary, error) {
	summary, err := f(ctx)
	if err != nil {
		log.G(ctx).WithError(err).Warn("kubelet API: cannot get the stats summary for /metrics/resource")
	}
	return summary, err
}

// figure is one value of a summary and the time it was taken; a zero time
// sends the sample without a timestamp.
type figure struct {
	value float64
	at    time.Time
}

// resourceFamily is one metric family of /metrics/resource and where its
// samples are in a summary: exactly one of node, pod and container is set,
// and returns false where the summary lacks the figure.
type resourceFamily struct {
	name, help, kind string
	node             func(*statsv1alpha1.NodeStats) (figure, bool)
	pod              func(*statsv1alpha1.PodStats) (figure, bool)
	container        func(*statsv1alpha1.ContainerStats) (figure, bool)
}

// resourceFamilies are the families of /metrics/resource as the kubelet
// (v1.36) serves them, sorted by name as a registry gathers them: the names
// metrics-server reads, and the help of each with its stability level in
// front, as the kubelet's metrics library writes it.
var resourceFamilies = []resourceFamily{
	{name: "container_cpu_usage_seconds_total", kind: "counter",
		help:      "[STABLE] Cumulative cpu time consumed by the container in core-seconds",
		container: func(c *statsv1alpha1.ContainerStats) (figure, bool) { return cpuFigure(c.CPU) }},
	{name: "container_memory_working_set_bytes", kind: "gauge",
		help:      "[STABLE] Current working set of the container in bytes",
		container: func(c *statsv1alpha1.ContainerStats) (figure, bool) { return memoryFigure(c.Memory) }},
	{name: "container_start_time_seconds", kind: "gauge",
		help:      "[STABLE] Start time of the container since unix epoch in seconds",
		container: startTimeFigure},
	{name: "container_swap_limit_bytes", kind: "gauge",
		help:      "[ALPHA] Current amount of the container swap limit in bytes. Reported only on non-windows systems",
		container: func(c *statsv1alpha1.ContainerStats) (figure, bool) { return swapLimitFigure(c.Swap) }},
	{name: "container_swap_usage_bytes", kind: "gauge",
		help:      "[ALPHA] Current amount of the container swap usage in bytes. Reported only on non-windows systems",
		container: func(c *statsv1alpha1.ContainerStats) (figure, bool) { return swapFigure(c.Swap) }},
	{name: "node_cpu_usage_seconds_total", kind: "counter",
		help: "[STABLE] Cumulative cpu time consumed by the node in core-seconds",
		node: func(n *statsv1alpha1.NodeStats) (figure, bool) { return cpuFigure(n.CPU) }},
	{name: "node_memory_working_set_bytes", kind: "gauge",
		help: "[STABLE] Current working set of the node in bytes",
		node: func(n *statsv1alpha1.NodeStats) (figure, bool) { return memoryFigure(n.Memory) }},
	{name: "node_swap_usage_bytes", kind: "gauge",
		help: "[ALPHA] Current swap usage of the node in bytes. Reported only on non-windows systems",
		node: func(n *statsv1alpha1.NodeStats) (figure, bool) { return swapFigure(n.Swap) }},
	{name: "pod_cpu_usage_seconds_total", kind: "counter",
		help: "[STABLE] Cumulative cpu time consumed by the pod in core-seconds",
		pod:  func(p *statsv1alpha1.PodStats) (figure, bool) { return cpuFigure(p.CPU) }},
	{name: "pod_memory_working_set_bytes", kind: "gauge",
		help: "[STABLE] Current working set of the pod in bytes",
		pod:  func(p *statsv1alpha1.PodStats) (figure, bool) { return memoryFigure(p.Memory) }},
	{name: "pod_swap_usage_bytes", kind: "gauge",
		help: "[ALPHA] Current amount of the pod swap usage in bytes. Reported only on non-windows systems",
		pod:  func(p *statsv1alpha1.PodStats) (figure, bool) { return swapFigure(p.Swap) }},
}

// scrapeErrorFamily comes last, after the families above in name order. The
// kubelet also had scrape_error, deprecated in 1.29 and hidden since.
var scrapeErrorFamily = resourceFamily{name: "resource_scrape_error", kind: "gauge",
	help: "[STABLE] 1 if there was an error while getting container metrics, 0 otherwise"}

func cpuFigure(s *statsv1alpha1.CPUStats) (figure, bool) {
	if s == nil || s.UsageCoreNanoSeconds == nil {
		return figure{}, false
	}
	return figure{float64(*s.UsageCoreNanoSeconds) / float64(time.Second), s.Time.Time}, true
}

func memoryFigure(s *statsv1alpha1.MemoryStats) (figure, bool) {
	if s == nil || s.WorkingSetBytes == nil {
		return figure{}, false
	}
	return figure{float64(*s.WorkingSetBytes), s.Time.Time}, true
}

func swapFigure(s *statsv1alpha1.SwapStats) (figure, bool) {
	if s == nil || s.SwapUsageBytes == nil {
		return figure{}, false
	}
	return figure{float64(*s.SwapUsageBytes), s.Time.Time}, true
}

// swapLimitFigure is what is used plus what is left, as the kubelet computes
// a container's swap limit.
func swapLimitFigure(s *statsv1alpha1.SwapStats) (figure, bool) {
	if s == nil || s.SwapAvailableBytes == nil {
		return figure{}, false
	}
	limit := float64(*s.SwapAvailableBytes)
	if s.SwapUsageBytes != nil {
		limit += float64(*s.SwapUsageBytes)
	}
	return figure{limit, s.Time.Time}, true
}

// startTimeFigure is a fact about the past, not a sample: the kubelet sends
// it without a timestamp.
func startTimeFigure(c *statsv1alpha1.ContainerStats) (figure, bool) {
	st := c.StartTime.Time
	if st.Unix() <= 0 {
		return figure{}, false
	}
	return figure{value: float64(st.UnixNano()) / float64(time.Second)}, true
}

// sampledContainer is a container of the summary with its pod.
type sampledContainer struct {
	pod *statsv1alpha1.PodStats
	*statsv1alpha1.ContainerStats
}

// sampled returns the pods of s and their containers in name order. A pod
// or container listed twice keeps its first listing, and one whose name is
// not UTF-8 is left out, so that an odd summary costs its odd samples, not
// the scrape.
func sampled(s *statsv1alpha1.Summary) ([]*statsv1alpha1.PodStats, []sampledContainer) {
	pods := make([]*statsv1alpha1.PodStats, 0, len(s.Pods))
	n := 0
	for i := range s.Pods {
		p := &s.Pods[i]
		if utf8.ValidString(p.PodRef.Namespace) && utf8.ValidString(p.PodRef.Name) {
			pods = append(pods, p)
			n += len(p.Containers)
		}
	}
	byRef := func(a, b *statsv1alpha1.PodStats) int {
		return cmp.Or(cmp.Compare(a.PodRef.Namespace, b.PodRef.Namespace), cmp.Compare(a.PodRef.Name, b.PodRef.Name))
	}
	slices.SortStableFunc(pods, byRef)
	pods = slices.CompactFunc(pods, func(a, b *statsv1alpha1.PodStats) bool { return byRef(a, b) == 0 })

	containers := make([]sampledContainer, 0, n)
	for _, p := range pods {
		first := len(containers)
		for i := range p.Containers {
			if c := &p.Containers[i]; utf8.ValidString(c.Name) {
				containers = append(containers, sampledContainer{p, c})
			}
		}
		own := containers[first:]
		slices.SortStableFunc(own, func(a, b sampledContainer) int { return cmp.Compare(a.Name, b.Name) })
		own = slices.CompactFunc(own, func(a, b sampledContainer) bool { return a.Name == b.Name })
		containers = containers[:first+len(own)]
	}
	return pods, containers
}

// sampleOf is whose figure a sample is: the node's (all empty), a pod's
// (namespace and pod) or a container's. Its family says which.
type sampleOf struct{ container, namespace, pod string }

// eachResourceSample calls sample for every sample of the exposition of
// /metrics/resource for s, or for a summary that could not be had
// (scrapeErr), family by family in order.
func eachResourceSample(s *statsv1alpha1.Summary, scrapeErr error, sample func(f *resourceFamily, v figure, of sampleOf)) {
	if scrapeErr == nil && s != nil {
		pods, containers := sampled(s)
		for i := range resourceFamilies {
			f := &resourceFamilies[i]
			switch {
			case f.node != nil:
				if v, ok := f.node(&s.Node); ok {
					sample(f, v, sampleOf{})
				}
			case f.pod != nil:
				for _, p := range pods {
					if v, ok := f.pod(p); ok {
						sample(f, v, sampleOf{namespace: p.PodRef.Namespace, pod: p.PodRef.Name})
					}
				}
			default:
				for _, c := range containers {
					if v, ok := f.container(c.ContainerStats); ok {
						sample(f, v, sampleOf{c.Name, c.pod.PodRef.Namespace, c.pod.PodRef.Name})
					}
				}
			}
		}
	}
	scrapeError := 0.0
	if scrapeErr != nil {
		scrapeError = 1
	}
	sample(&scrapeErrorFamily, figure{value: scrapeError}, sampleOf{})
}

// writeResourceMetrics writes the exposition of /metrics/resource in the
// Prometheus text format, a line at a time: the response writer buffers
// them. A family's HELP and TYPE lines go out with its first sample, so that
// a family without samples is left out, as a registry leaves it out.
func writeResourceMetrics(w io.Writer, s *statsv1alpha1.Summary, scrapeErr error) error {
	var line []byte
	var err error
	var headed *resourceFamily
	eachResourceSample(s, scrapeErr, func(f *resourceFamily, v figure, of sampleOf) {
		b := line[:0]
		if headed != f {
			headed = f
			b = append(b, "# HELP "...)
			b = append(b, f.name...)
			b = append(b, ' ')
			b = append(b, f.help...)
			b = append(b, "\n# TYPE "...)
			b = append(b, f.name...)
			b = append(b, ' ')
			b = append(b, f.kind...)
			b = append(b, '\n')
		}
		b = append(b, f.name...)
		if f.container != nil {
			b = append(b, `{container="`...)
			b = appendLabelValue(b, of.container)
			b = append(b, `",namespace="`...)
		} else if f.pod != nil {
			b = append(b, `{namespace="`...)
		}
		if f.container != nil || f.pod != nil {
			b = appendLabelValue(b, of.namespace)
			b = append(b, `",pod="`...)
			b = appendLabelValue(b, of.pod)
			b = append(b, `"}`...)
		}
		b = append(b, ' ')
		b = strconv.AppendFloat(b, v.value, 'g', -1, 64)
		if !v.at.IsZero() {
			b = append(b, ' ')
			b = strconv.AppendInt(b, v.at.UnixMilli(), 10)
		}
		line = append(b, '\n')
		if err == nil {
			_, err = w.Write(line)
		}
	})
	return err
}

// The label names of resourceMetricFamilies' samples.
var labelContainer, labelNamespace, labelPod = "container", "namespace", "pod"

// resourceMetricFamilies returns the same samples as metric families.
func resourceMetricFamilies(s *statsv1alpha1.Summary, scrapeErr error) []*dto.MetricFamily {
	var families []*dto.MetricFamily
	var current *resourceFamily
	eachResourceSample(s, scrapeErr, func(f *resourceFamily, v figure, of sampleOf) {
		if current != f {
			current = f
			typ := dto.MetricType_GAUGE
			if f.kind == "counter" {
				typ = dto.MetricType_COUNTER
			}
			families = append(families, &dto.MetricFamily{Name: &f.name, Help: &f.help, Type: &typ})
		}
		m := &dto.Metric{}
		if f.container != nil {
			m.Label = append(m.Label, &dto.LabelPair{Name: &labelContainer, Value: &of.container})
		}
		if f.container != nil || f.pod != nil {
			m.Label = append(m.Label, &dto.LabelPair{Name: &labelNamespace, Value: &of.namespace}, &dto.LabelPair{Name: &labelPod, Value: &of.pod})
		}
		if f.kind == "counter" {
			m.Counter = &dto.Counter{Value: &v.value}
		} else {
			m.Gauge = &dto.Gauge{Value: &v.value}
		}
		if !v.at.IsZero() {
			ms := v.at.UnixMilli()
			m.TimestampMs = &ms
		}
		mf := families[len(families)-1]
		mf.Metric = append(mf.Metric, m)
	})
	return families
}

// appendLabelValue appends s escaped as the text format escapes a label
// value: backslash, double quote and line feed.
func appendLabelValue(b []byte, s string) []byte {
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\':
			b = append(b, `\\`...)
		case '"':
			b = append(b, `\"`...)
		case '\n':
			b = append(b, `\n`...)
		default:
			b = append(b, c)
		}
	}
	return b
}
