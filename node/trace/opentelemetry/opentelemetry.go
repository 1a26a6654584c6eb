// Package opentelemetry is the trace package's Tracer for OpenTelemetry,
// under the prior virtual-kubelet project's name for it. Spans go to the
// global TracerProvider (otel.GetTracerProvider), which the program sets up
// with its exporter:
//
//	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithBatcher(exporter)))
//	trace.T = opentelemetry.Adapter{}
//
// Span names are those of the trace package's callers, whichever Tracer
// records them.
package opentelemetry

import (
	"context"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	oteltrace "go.opentelemetry.io/otel/trace"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace"
	"github.com/vkubelet/virtual-kubelet/node/trace/internal/spanlog"
)

// ScopeName is the instrumentation scope of the spans, as exporters show it.
const ScopeName = "github.com/vkubelet/virtual-kubelet"

// Adapter starts OpenTelemetry spans with the global TracerProvider.
type Adapter struct{}

// StartSpan starts a span named name as a child of the context's span, and
// returns a context carrying it.
func (Adapter) StartSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	ctx, s := otel.GetTracerProvider().Tracer(ScopeName).Start(ctx, name)
	return ctx, &span{s: s, logger: log.G(ctx)}
}

type span struct {
	s      oteltrace.Span
	logger log.Logger
}

func (s *span) End() { s.s.End() }

func (s *span) SetStatus(err error) {
	if err == nil {
		s.s.SetStatus(codes.Ok, "")
		return
	}
	s.s.RecordError(err)
	s.s.SetStatus(codes.Error, err.Error())
}

func (s *span) WithField(ctx context.Context, key string, value any) context.Context {
	s.s.SetAttributes(attrs.Of(key, value))
	return log.WithLogger(ctx, log.G(ctx).WithField(key, value))
}

func (s *span) WithFields(ctx context.Context, fields log.Fields) context.Context {
	s.s.SetAttributes(attrs.All(fields)...)
	return log.WithFields(ctx, fields)
}

// Logger returns a logger that also records its entries as events of the
// span, named by their message.
func (s *span) Logger() log.Logger {
	return spanlog.New(s.logger, func(level, msg string, fields log.Fields) {
		attrs := append([]attribute.KeyValue{attribute.String("level", level)}, attrs.All(fields)...)
		s.s.AddEvent(msg, oteltrace.WithAttributes(attrs...))
	})
}

// attrs makes OpenTelemetry attributes of log fields.
var attrs = spanlog.Attrs[attribute.KeyValue]{
	String:  attribute.String,
	Bool:    attribute.Bool,
	Int64:   attribute.Int64,
	Float64: attribute.Float64,
}
