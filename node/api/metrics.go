package api

import (
	"bytes"
	"context"
	"fmt"
	"net/http"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
)

// MetricsResourceRouteSuffix is the path of the kubelet's resource metrics,
// which metrics-server scrapes for `kubectl top` and the
// HorizontalPodAutoscaler.
const MetricsResourceRouteSuffix = "/metrics/resource"

// PrometheusTextFormatContentType is the Content-Type of /metrics/resource:
// the Prometheus text exposition format.
const PrometheusTextFormatContentType = "text/plain; version=0.0.4"

// PodMetricsResourceHandlerFunc returns the metric families /metrics/resource
// serves. A provider whose resource metrics are its stats summary needs
// none: without one, the route is written from the summary.
type PodMetricsResourceHandlerFunc func(context.Context) ([]*dto.MetricFamily, error)

// PodMetricsConfig holds the provider's functions behind the node's metrics
// routes. A nil function makes its route answer 501 Not Implemented.
type PodMetricsConfig struct {
	// GetStatsSummary serves /stats/summary.
	GetStatsSummary PodStatsSummaryHandlerFunc
	// GetMetricsResource serves /metrics/resource; when it is nil, the
	// route is written from GetStatsSummary in the kubelet's format.
	GetMetricsResource PodMetricsResourceHandlerFunc
}

// AttachPodMetricsRoutes registers GET /stats/summary and GET
// /metrics/resource on mux. AttachPodRoutes includes them; this is for a
// server that serves the metrics routes on their own.
func AttachPodMetricsRoutes(p PodMetricsConfig, mux ServeMux) {
	mux.Handle("GET /stats/summary", HandlePodStatsSummary(p.GetStatsSummary))
	mux.Handle("GET "+MetricsResourceRouteSuffix, metricsResourceHandler(p.GetStatsSummary, p.GetMetricsResource))
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
// stamped with the time of its figure. They hold the samples
// HandleMetricsResourceFromSummary writes; a node whose GetMetricsResource
// is nil serves those directly, without building families.
// When f fails, the families hold resource_scrape_error 1 (0 otherwise) and
// the error is logged, as the kubelet answers a scrape it cannot fill.
func MetricsResourceFromSummary(f PodStatsSummaryHandlerFunc) PodMetricsResourceHandlerFunc {
	return func(ctx context.Context) ([]*dto.MetricFamily, error) {
		summary, err := summaryForMetrics(ctx, f)
		return resourceMetricFamilies(summary, err), nil
	}
}

// metricsResourceHandler serves /metrics/resource from the provider's own
// families when it has them, else from its stats summary.
func metricsResourceHandler(summary PodStatsSummaryHandlerFunc, families PodMetricsResourceHandlerFunc) http.HandlerFunc {
	if families != nil || summary == nil {
		return HandlePodMetricsResource(families)
	}
	return HandleMetricsResourceFromSummary(summary)
}
