package api

import (
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// The metrics of /metrics/resource, named as the kubelet names them (the
// metrics-server reads them by these names).
var (
	containerLabels = []string{"container", "pod", "namespace"}
	podLabels       = []string{"pod", "namespace"}

	nodeCPUUsageDesc = prometheus.NewDesc("node_cpu_usage_seconds_total",
		"Cumulative CPU time consumed by the node, in core-seconds.", nil, nil)
	nodeMemoryWorkingSetDesc = prometheus.NewDesc("node_memory_working_set_bytes",
		"Current working set of the node, in bytes.", nil, nil)
	nodeSwapUsageDesc = prometheus.NewDesc("node_swap_usage_bytes",
		"Current swap usage of the node, in bytes.", nil, nil)
	containerCPUUsageDesc = prometheus.NewDesc("container_cpu_usage_seconds_total",
		"Cumulative CPU time consumed by the container, in core-seconds.", containerLabels, nil)
	containerMemoryWorkingSetDesc = prometheus.NewDesc("container_memory_working_set_bytes",
		"Current working set of the container, in bytes.", containerLabels, nil)
	containerSwapUsageDesc = prometheus.NewDesc("container_swap_usage_bytes",
		"Current swap usage of the container, in bytes.", containerLabels, nil)
	containerStartTimeDesc = prometheus.NewDesc("container_start_time_seconds",
		"Start time of the container, in seconds since the Unix epoch.", containerLabels, nil)
	podCPUUsageDesc = prometheus.NewDesc("pod_cpu_usage_seconds_total",
		"Cumulative CPU time consumed by the pod, in core-seconds.", podLabels, nil)
	podMemoryWorkingSetDesc = prometheus.NewDesc("pod_memory_working_set_bytes",
		"Current working set of the pod, in bytes.", podLabels, nil)
	podSwapUsageDesc = prometheus.NewDesc("pod_swap_usage_bytes",
		"Current swap usage of the pod, in bytes.", podLabels, nil)
	scrapeErrorDesc = prometheus.NewDesc("scrape_error",
		"1 if getting the stats summary failed, 0 otherwise.", nil, nil)
)

// resourceMetrics serves /metrics/resource: the CPU and memory figures of
// the stats summary in the Prometheus exposition format. A failure to get
// the summary is reported as scrape_error 1, as the kubelet does.
func (s *server) resourceMetrics(w http.ResponseWriter, r *http.Request) {
	if s.cfg.GetStatsSummary == nil {
		notImplemented(w, "resource metrics")
		return
	}
	summary, err := s.cfg.GetStatsSummary(r.Context())
	if err != nil {
		log.G(r.Context()).WithError(err).Warn("kubelet API: cannot get the stats summary for /metrics/resource")
	}
	reg := prometheus.NewRegistry()
	if err := reg.Register(&summaryCollector{summary: summary, err: err}); err != nil {
		writeError(r.Context(), w, err)
		return
	}
	promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}).ServeHTTP(w, r)
}

// summaryCollector is a prometheus.Collector over one stats summary.
type summaryCollector struct {
	summary *statsv1alpha1.Summary
	err     error
}

func (c *summaryCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		nodeCPUUsageDesc, nodeMemoryWorkingSetDesc, nodeSwapUsageDesc,
		containerCPUUsageDesc, containerMemoryWorkingSetDesc, containerSwapUsageDesc, containerStartTimeDesc,
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
			if st := ct.StartTime.Time; !st.IsZero() {
				emit(ch, containerStartTimeDesc, prometheus.GaugeValue, float64(st.UnixNano())/float64(time.Second), st, labels...)
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
