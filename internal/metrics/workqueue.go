package metrics

import (
	"k8s.io/client-go/util/workqueue"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/vkubelet/virtual-kubelet/node"
)

// The work queue metrics under the names, help and buckets component-base
// gives client-go's queues (workqueue_*{name}). They are defined here rather
// than through component-base's provider so that the pod controller's
// queues can report them without a goroutine per queue
// (node.PodControllerConfig.QueueMetrics).
var (
	queueDepth = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: "workqueue", Name: "depth", StabilityLevel: metrics.BETA,
		Help: "Current depth of workqueue",
	}, []string{"name"})
	queueAdds = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: "workqueue", Name: "adds_total", StabilityLevel: metrics.BETA,
		Help: "Total number of adds handled by workqueue",
	}, []string{"name"})
	queueLatency = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: "workqueue", Name: "queue_duration_seconds", StabilityLevel: metrics.BETA,
		Help:    "How long in seconds an item stays in workqueue before being requested.",
		Buckets: metrics.ExponentialBuckets(10e-9, 10, 10),
	}, []string{"name"})
	queueWorkDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
		Subsystem: "workqueue", Name: "work_duration_seconds", StabilityLevel: metrics.BETA,
		Help:    "How long in seconds processing an item from workqueue takes.",
		Buckets: metrics.ExponentialBuckets(10e-9, 10, 10),
	}, []string{"name"})
	queueUnfinished = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: "workqueue", Name: "unfinished_work_seconds", StabilityLevel: metrics.BETA,
		Help: "How many seconds of work has done that is in progress and hasn't been observed by work_duration. " +
			"Large values indicate stuck threads. One can deduce the number of stuck threads by observing the rate at which this increases.",
	}, []string{"name"})
	queueLongestRunning = metrics.NewGaugeVec(&metrics.GaugeOpts{
		Subsystem: "workqueue", Name: "longest_running_processor_seconds", StabilityLevel: metrics.BETA,
		Help: "How many seconds has the longest running processor for workqueue been running.",
	}, []string{"name"})
	queueRetries = metrics.NewCounterVec(&metrics.CounterOpts{
		Subsystem: "workqueue", Name: "retries_total", StabilityLevel: metrics.BETA,
		Help: "Total number of retries handled by workqueue",
	}, []string{"name"})
)

func init() {
	legacyregistry.MustRegister(queueDepth, queueAdds, queueLatency, queueWorkDuration, queueUnfinished, queueLongestRunning, queueRetries)
	// Each queue's series are there from the start, at zero.
	for _, name := range []string{node.SyncPodsFromKubernetesQueue, node.DeletePodsFromKubernetesQueue, node.SyncPodStatusFromProviderQueue, node.SyncPodVolumesQueue} {
		QueueMetrics.NewRetriesMetric(name)
		QueueMetrics.NewAddsMetric(name)
		QueueMetrics.NewDepthMetric(name)
	}
}

// QueueMetrics is the pod controller's QueueMetrics: client-go's work queue
// metrics, labelled by queue name. The queues of every node of the process
// add up under one name.
var QueueMetrics workqueue.MetricsProvider = queueMetricsProvider{}

type queueMetricsProvider struct{}

func (queueMetricsProvider) NewDepthMetric(name string) workqueue.GaugeMetric {
	return queueDepth.WithLabelValues(name)
}

func (queueMetricsProvider) NewAddsMetric(name string) workqueue.CounterMetric {
	return queueAdds.WithLabelValues(name)
}

func (queueMetricsProvider) NewLatencyMetric(name string) workqueue.HistogramMetric {
	return queueLatency.WithLabelValues(name)
}

func (queueMetricsProvider) NewWorkDurationMetric(name string) workqueue.HistogramMetric {
	return queueWorkDuration.WithLabelValues(name)
}

func (queueMetricsProvider) NewUnfinishedWorkSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueUnfinished.WithLabelValues(name)
}

func (queueMetricsProvider) NewLongestRunningProcessorSecondsMetric(name string) workqueue.SettableGaugeMetric {
	return queueLongestRunning.WithLabelValues(name)
}

func (queueMetricsProvider) NewRetriesMetric(name string) workqueue.CounterMetric {
	return queueRetries.WithLabelValues(name)
}
