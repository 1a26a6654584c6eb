package tracing

import (
	"context"
	"strings"
	"testing"

	"go.opencensus.io/trace"

	"github.com/vkubelet/virtual-kubelet/internal/tracing/jaegertest"
)

func TestJaegerExport(t *testing.T) {
	c := jaegertest.NewCollector()
	defer c.Close()
	stop, err := Setup(Options{
		Exporters:               []string{"jaeger"},
		ServiceName:             "vk-test",
		SampleRate:              "always",
		Tags:                    map[string]string{"cluster": "local"},
		JaegerCollectorEndpoint: c.Endpoint(),
	})
	if err != nil {
		t.Fatal(err)
	}
	_, span := trace.StartSpan(context.Background(), "provider.CreatePod")
	span.AddAttributes(trace.StringAttribute("key", "ns/pod"))
	span.End()
	stop() // flushes

	spans, errs := c.Spans()
	if len(errs) > 0 {
		t.Fatalf("collector could not decode: %v", errs)
	}
	if len(spans) != 1 {
		t.Fatalf("got %d spans, want 1", len(spans))
	}
	s := spans[0]
	if s.Service != "vk-test" || s.Process["cluster"] != "local" || s.Name != "provider.CreatePod" || s.Tags["key"] != "ns/pod" {
		t.Errorf("span %+v", s)
	}
}

func TestSetupErrors(t *testing.T) {
	cases := map[string]struct {
		opts Options
		want string
	}{
		"unknown exporter": {Options{Exporters: []string{"zipkin"}}, `unknown exporter "zipkin" (known: jaeger, otlp)`},
		"no endpoint":      {Options{Exporters: []string{"jaeger"}}, "needs a collector endpoint"},
		"bad rate":         {Options{SampleRate: "2"}, `--trace-sample-rate: "2"`},
		"bad rate word":    {Options{SampleRate: "sometimes"}, `"sometimes"`},
	}
	for name, c := range cases {
		if _, err := Setup(c.opts); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%s: %v, want %q", name, err, c.want)
		}
	}
}
