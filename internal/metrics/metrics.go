// Package metrics exposes the daemon's Prometheus metrics: the work queues'
// (depth, latency, work duration, retries, under client-go's names), the API
// client's (request latency and results by verb, through the component-base
// adapter the kubelet uses), provider call latency, pods by phase and log
// lines dropped.
package metrics

import (
	"errors"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/component-base/metrics"
	"k8s.io/component-base/metrics/legacyregistry"

	"github.com/vkubelet/virtual-kubelet/internal/ha"
	"github.com/vkubelet/virtual-kubelet/internal/logging"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"

	// Registered for its side effect: client-go's request metrics.
	_ "k8s.io/component-base/metrics/prometheus/restclient"
)

const namespace = "virtual_kubelet"

var providerCallDuration = metrics.NewHistogramVec(&metrics.HistogramOpts{
	Namespace:      namespace,
	Name:           "provider_call_duration_seconds",
	Help:           "Duration of provider calls by method and result (success, not_found, fenced or error).",
	Buckets:        []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10},
	StabilityLevel: metrics.ALPHA,
}, []string{"method", "result"})

// logLinesDropped is read from the log output's count at each scrape.
var logLinesDropped = prometheus.NewCounterFunc(prometheus.CounterOpts{
	Namespace: namespace,
	Name:      "log_lines_dropped_total",
	Help:      "Log lines dropped because the log output could not keep up.",
}, func() float64 { return float64(logging.Dropped()) })

func init() {
	legacyregistry.MustRegister(providerCallDuration)
	legacyregistry.RawMustRegister(logLinesDropped)
}

// ObserveProviderCall records one provider call; it is the pod controller's
// ProviderCallObserver. A NotFound answer is its own result, not an error:
// the controller asks about pods the provider may rightly have dropped (a
// deleted pod, at each resync), and those answers would drown real errors.
// A call refused by a replica's fence (ha.ErrFenced) never reached the
// provider: it is fenced.
func ObserveProviderCall(method string, took time.Duration, err error) {
	result := "success"
	switch {
	case errdefs.IsNotFound(err):
		result = "not_found"
	case errors.Is(err, ha.ErrFenced):
		result = "fenced"
	case err != nil:
		result = "error"
	}
	providerCallDuration.WithLabelValues(method, result).Observe(took.Seconds())
}

// podPhases counts the node's pods by phase when scraped.
type podPhases struct {
	desc *prometheus.Desc

	mu     sync.Mutex
	lister corev1listers.PodLister
}

// phases is the process's one pod phase collector: a registry takes a
// collector once, and a process may run its nodes more than once (tests).
var phases = &podPhases{desc: prometheus.NewDesc(namespace+"_pods", "Pods bound to the node, by phase.", []string{"phase"}, nil)}

var registerPhases sync.Once

// RegisterPodPhases exports virtual_kubelet_pods{phase}, counted from the
// pod informer's cache at each scrape. A later call counts from its lister
// instead.
func RegisterPodPhases(lister corev1listers.PodLister) {
	phases.mu.Lock()
	phases.lister = lister
	phases.mu.Unlock()
	registerPhases.Do(func() { legacyregistry.RawMustRegister(phases) })
}

func (c *podPhases) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *podPhases) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	lister := c.lister
	c.mu.Unlock()
	pods, err := lister.List(labels.Everything())
	if err != nil {
		return
	}
	counts := map[corev1.PodPhase]int{
		corev1.PodPending: 0, corev1.PodRunning: 0, corev1.PodSucceeded: 0, corev1.PodFailed: 0, corev1.PodUnknown: 0,
	}
	for _, p := range pods {
		phase := p.Status.Phase
		if phase == "" {
			phase = corev1.PodPending
		}
		counts[phase]++
	}
	for phase, n := range counts {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(n), string(phase))
	}
}

// Handler serves every registered metric in the Prometheus text format.
func Handler() http.Handler { return legacyregistry.Handler() }
