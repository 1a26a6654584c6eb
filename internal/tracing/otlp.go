package tracing

import (
	"context"
	"fmt"
	"os"
	"time"

	"go.opencensus.io/trace"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/vkubelet/virtual-kubelet/node/trace/opentelemetry"
)

// otlpShutdownTimeout bounds the final export on shutdown.
const otlpShutdownTimeout = 10 * time.Second

// otlpProtocol is the OTLP transport the standard environment variables
// choose: OTEL_EXPORTER_OTLP_TRACES_PROTOCOL, else
// OTEL_EXPORTER_OTLP_PROTOCOL, else http/protobuf as the specification
// says.
func otlpProtocol() (name string, from string) {
	for _, env := range []string{"OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "OTEL_EXPORTER_OTLP_PROTOCOL"} {
		if v := os.Getenv(env); v != "" {
			return v, env
		}
	}
	return "http/protobuf", "the default"
}

// newOTLP exports the spans over OTLP. The exporters read the endpoint,
// headers, TLS settings, compression and timeout from the standard
// OTEL_EXPORTER_OTLP_* variables; the resource carries --trace-service-name
// and --trace-tag, after OTEL_RESOURCE_ATTRIBUTES.
func newOTLP(opts Options) (trace.Exporter, func(), error) {
	var client otlptrace.Client
	switch protocol, from := otlpProtocol(); protocol {
	case "grpc":
		client = otlptracegrpc.NewClient()
	case "http/protobuf":
		client = otlptracehttp.NewClient()
	default:
		return nil, nil, fmt.Errorf("%s: protocol %q is not supported (grpc or http/protobuf)", from, protocol)
	}
	// New only prepares the connection; the first export dials.
	exp, err := otlptrace.New(context.Background(), client)
	if err != nil {
		return nil, nil, err
	}
	attrs := []attribute.KeyValue{attribute.String("service.name", opts.ServiceName)}
	for k, v := range opts.Tags {
		attrs = append(attrs, attribute.String(k, v))
	}
	res, err := resource.Merge(resource.Default(), resource.NewSchemaless(attrs...))
	if err != nil {
		return nil, nil, err
	}
	// The SDK reports failed exports to the global handler.
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) { warnExport("otlp", err) }))
	o := &otlpExporter{batch: sdktrace.NewBatchSpanProcessor(exp), resource: res}
	return o, o.shutdown, nil
}

// otlpExporter hands OpenCensus spans to an OpenTelemetry batch processor,
// so both exporters send the same spans, names, IDs and parent links.
type otlpExporter struct {
	batch    sdktrace.SpanProcessor
	resource *resource.Resource
}

// ExportSpan queues one span; the processor exports in batches.
func (o *otlpExporter) ExportSpan(s *trace.SpanData) { o.batch.OnEnd(o.readOnly(s)) }

func (o *otlpExporter) shutdown() {
	ctx, cancel := context.WithTimeout(context.Background(), otlpShutdownTimeout)
	defer cancel()
	if err := o.batch.Shutdown(ctx); err != nil {
		warnExport("otlp", err)
	}
}

// readOnly converts an OpenCensus span. tracetest.SpanStub is the SDK's
// exported way to build a ReadOnlySpan from recorded data; the SDK's own
// spans can only be made by starting them.
func (o *otlpExporter) readOnly(s *trace.SpanData) sdktrace.ReadOnlySpan {
	stub := tracetest.SpanStub{
		Name: s.Name,
		SpanContext: oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
			TraceID: oteltrace.TraceID(s.TraceID), SpanID: oteltrace.SpanID(s.SpanID), TraceFlags: oteltrace.FlagsSampled,
		}),
		SpanKind:             spanKind(s.SpanKind),
		StartTime:            s.StartTime,
		EndTime:              s.EndTime,
		Attributes:           keyValues(s.Attributes),
		Status:               status(s.Status),
		DroppedAttributes:    s.DroppedAttributeCount,
		DroppedEvents:        s.DroppedAnnotationCount,
		DroppedLinks:         s.DroppedLinkCount,
		ChildSpanCount:       s.ChildSpanCount,
		Resource:             o.resource,
		InstrumentationScope: instrumentation.Scope{Name: opentelemetry.ScopeName},
	}
	if s.ParentSpanID != (trace.SpanID{}) {
		stub.Parent = oteltrace.NewSpanContext(oteltrace.SpanContextConfig{
			TraceID: oteltrace.TraceID(s.TraceID), SpanID: oteltrace.SpanID(s.ParentSpanID),
			TraceFlags: oteltrace.FlagsSampled, Remote: s.HasRemoteParent,
		})
	}
	for _, a := range s.Annotations {
		stub.Events = append(stub.Events, sdktrace.Event{Name: a.Message, Time: a.Time, Attributes: keyValues(a.Attributes)})
	}
	for _, l := range s.Links {
		stub.Links = append(stub.Links, sdktrace.Link{
			SpanContext: oteltrace.NewSpanContext(oteltrace.SpanContextConfig{TraceID: oteltrace.TraceID(l.TraceID), SpanID: oteltrace.SpanID(l.SpanID)}),
			Attributes:  keyValues(l.Attributes),
		})
	}
	return stub.Snapshot()
}

func spanKind(k int) oteltrace.SpanKind {
	switch k {
	case trace.SpanKindServer:
		return oteltrace.SpanKindServer
	case trace.SpanKindClient:
		return oteltrace.SpanKindClient
	}
	return oteltrace.SpanKindInternal
}

// status maps OpenCensus' gRPC codes: OK (0) leaves the status unset, as
// OpenTelemetry instrumentation does for success; any other is an error.
func status(s trace.Status) sdktrace.Status {
	if s.Code == trace.StatusCodeOK {
		return sdktrace.Status{Code: codes.Unset}
	}
	return sdktrace.Status{Code: codes.Error, Description: s.Message}
}

// keyValues converts OpenCensus attributes, which are bool, int64, float64
// or string.
func keyValues(attrs map[string]any) []attribute.KeyValue {
	kvs := make([]attribute.KeyValue, 0, len(attrs))
	for k, v := range attrs {
		switch v := v.(type) {
		case bool:
			kvs = append(kvs, attribute.Bool(k, v))
		case int64:
			kvs = append(kvs, attribute.Int64(k, v))
		case float64:
			kvs = append(kvs, attribute.Float64(k, v))
		default:
			kvs = append(kvs, attribute.String(k, fmt.Sprint(v)))
		}
	}
	return kvs
}
