package tracing

import (
	"context"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/tracing/jaegertest"
	"github.com/vkubelet/virtual-kubelet/internal/tracing/otlptest"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	vktrace "github.com/vkubelet/virtual-kubelet/node/trace"
	"github.com/vkubelet/virtual-kubelet/node/trace/opentelemetry"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
)

// TestOTLPExport: with Jaeger and OTLP both on, the spans of the trace
// package reach an OTLP receiver over each transport with the names Jaeger
// gets, their parent link, attributes, log events, status and resource.
func TestOTLPExport(t *testing.T) {
	for _, protocol := range []string{"grpc", "http/protobuf"} {
		t.Run(protocol, func(t *testing.T) {
			var r *otlptest.Receiver
			if protocol == "grpc" {
				var err error
				if r, err = otlptest.NewGRPC(); err != nil {
					t.Fatal(err)
				}
			} else {
				r = otlptest.NewHTTP()
			}
			defer r.Close()
			jaeger := jaegertest.NewCollector()
			defer jaeger.Close()
			t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", protocol)
			t.Setenv("OTEL_EXPORTER_OTLP_ENDPOINT", r.Endpoint())
			stop, err := Setup(Options{
				Exporters:               []string{"jaeger", "otlp"},
				ServiceName:             "vk-test",
				SampleRate:              "always",
				Tags:                    map[string]string{"cluster": "local"},
				JaegerCollectorEndpoint: jaeger.Endpoint(),
			})
			if err != nil {
				t.Fatal(err)
			}
			ctx, parent := vktrace.StartSpan(context.Background(), "syncPodsFromKubernetes")
			ctx = parent.WithField(ctx, "key", "ns/web")
			_, child := vktrace.StartSpan(ctx, "provider.CreatePod")
			child.Logger().Info("creating")
			child.SetStatus(errdefs.InvalidInput("no such image"))
			child.End()
			parent.SetStatus(nil)
			parent.End()
			stop() // flushes both

			spans := r.Spans()
			byName := map[string]otlptest.Span{}
			for _, s := range spans {
				byName[s.Name] = s
			}
			p, c := byName["syncPodsFromKubernetes"], byName["provider.CreatePod"]
			if len(spans) != 2 || p.SpanID == "" || c.SpanID == "" {
				t.Fatalf("received %+v, want the two spans", spans)
			}
			if c.ParentID != p.SpanID || c.TraceID != p.TraceID || p.ParentID != "" {
				t.Errorf("links: parent %+v, child %+v", p, c)
			}
			if p.Attributes["key"] != "ns/web" || p.Status != tracepb.Status_STATUS_CODE_UNSET || c.Status != tracepb.Status_STATUS_CODE_ERROR {
				t.Errorf("attributes or status: parent %+v, child %+v", p, c)
			}
			if len(c.Events) != 1 || c.Events[0] != "creating" {
				t.Errorf("child events %v, want the logged line", c.Events)
			}
			if c.Resource["service.name"] != "vk-test" || c.Resource["cluster"] != "local" || c.Scope != opentelemetry.ScopeName {
				t.Errorf("resource %v, scope %q", c.Resource, c.Scope)
			}
			jspans, errs := jaeger.Spans()
			if len(errs) > 0 || len(jspans) != 2 {
				t.Fatalf("jaeger: %d spans, errors %v", len(jspans), errs)
			}
			for _, s := range jspans {
				if _, ok := byName[s.Name]; !ok {
					t.Errorf("jaeger got %q, OTLP did not", s.Name)
				}
			}
		})
	}
}

func TestOTLPProtocolErrors(t *testing.T) {
	t.Setenv("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc")
	t.Setenv("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/json")
	_, err := Setup(Options{Exporters: []string{"otlp"}})
	if want := `OTEL_EXPORTER_OTLP_TRACES_PROTOCOL: protocol "http/json" is not supported`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want one containing %q", err, want)
	}
}
