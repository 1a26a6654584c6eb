// Package tracing exports the OpenCensus spans the controllers and the
// kubelet API record (one per queue item, provider call and request), to
// Jaeger and over OTLP.
package tracing

import (
	"fmt"
	"sort"
	"strconv"
	"strings"

	"contrib.go.opencensus.io/exporter/jaeger"
	"github.com/sirupsen/logrus"
	"go.opencensus.io/trace"
)

// Options configure span export.
type Options struct {
	// Exporters names the exporters to use (see Exporters); none disables
	// export.
	Exporters []string
	// ServiceName names the process in the tracing backend.
	ServiceName string
	// SampleRate is "always", "never", or the fraction of traces to sample,
	// 0 to 1. Empty keeps OpenCensus' default (1 in 10,000).
	SampleRate string
	// Tags are added to the process of every exported span.
	Tags map[string]string

	// JaegerCollectorEndpoint is the Jaeger collector's HTTP endpoint, e.g.
	// http://jaeger-collector:14268/api/traces.
	JaegerCollectorEndpoint string
	// JaegerAgentEndpoint is the Jaeger agent's UDP host:port, e.g.
	// localhost:6831; used when no collector endpoint is given.
	JaegerAgentEndpoint string
}

// exporter starts one kind of exporter and returns how to flush it.
type exporter func(Options) (trace.Exporter, func(), error)

// Exporters are the exporters --trace-exporter accepts.
var Exporters = map[string]exporter{
	"jaeger": newJaeger,
	"otlp":   newOTLP,
}

// ExporterNames lists the known exporters, sorted.
func ExporterNames() []string {
	names := make([]string, 0, len(Exporters))
	for n := range Exporters {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ParseSampler turns a --trace-sample-rate value into a sampler; nil means
// the default.
func ParseSampler(rate string) (trace.Sampler, error) {
	switch strings.ToLower(rate) {
	case "":
		return nil, nil
	case "always":
		return trace.AlwaysSample(), nil
	case "never":
		return trace.NeverSample(), nil
	}
	f, err := strconv.ParseFloat(rate, 64)
	if err != nil || f < 0 || f > 1 {
		return nil, fmt.Errorf("--trace-sample-rate: %q is not \"always\", \"never\" or a fraction from 0 to 1", rate)
	}
	return trace.ProbabilitySampler(f), nil
}

// Setup registers the exporters and the sampler. The returned function
// flushes and unregisters them; call it on shutdown.
func Setup(opts Options) (func(), error) {
	sampler, err := ParseSampler(opts.SampleRate)
	if err != nil {
		return nil, err
	}
	var stops []func()
	stop := func() {
		for _, s := range stops {
			s()
		}
	}
	for _, name := range opts.Exporters {
		newExporter, ok := Exporters[name]
		if !ok {
			stop()
			return nil, fmt.Errorf("--trace-exporter: unknown exporter %q (known: %s)", name, strings.Join(ExporterNames(), ", "))
		}
		e, flush, err := newExporter(opts)
		if err != nil {
			stop()
			return nil, fmt.Errorf("--trace-exporter %s: %w", name, err)
		}
		trace.RegisterExporter(e)
		stops = append(stops, func() { flush(); trace.UnregisterExporter(e) })
	}
	if sampler != nil {
		trace.ApplyConfig(trace.Config{DefaultSampler: sampler})
	}
	return stop, nil
}

// warnExport logs a failed export: spans are lost, the daemon carries on.
func warnExport(exporter string, err error) {
	logrus.WithError(err).Warn("exporting spans to " + exporter)
}

func newJaeger(opts Options) (trace.Exporter, func(), error) {
	if opts.JaegerCollectorEndpoint == "" && opts.JaegerAgentEndpoint == "" {
		return nil, nil, fmt.Errorf("needs a collector endpoint (--jaeger-endpoint or JAEGER_ENDPOINT) or an agent endpoint (--jaeger-agent-endpoint or JAEGER_AGENT_ENDPOINT)")
	}
	tags := make([]jaeger.Tag, 0, len(opts.Tags))
	for k, v := range opts.Tags {
		tags = append(tags, jaeger.StringTag(k, v))
	}
	e, err := jaeger.NewExporter(jaeger.Options{
		CollectorEndpoint: opts.JaegerCollectorEndpoint,
		AgentEndpoint:     opts.JaegerAgentEndpoint,
		Process:           jaeger.Process{ServiceName: opts.ServiceName, Tags: tags},
		OnError:           func(err error) { warnExport("jaeger", err) },
	})
	if err != nil {
		return nil, nil, err
	}
	return e, e.Flush, nil
}
