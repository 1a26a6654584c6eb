// Package trace starts spans around the work of the controllers and the
// kubelet API, through a Tracer a program can replace. The default, T,
// records OpenCensus spans (which the daemon exports to Jaeger); WithTracer
// sets another for one context.
//
//	ctx, span := trace.StartSpan(ctx, "provider.CreatePod")
//	defer span.End()
//	ctx = span.WithField(ctx, "pod", name) // on the span and in log.G(ctx)
//	if err != nil {
//		span.SetStatus(err)
//	}
package trace

import (
	"context"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace/internal/ocspan"
)

// Span is one timed operation.
type Span interface {
	// End finishes the span.
	End()
	// SetStatus records err as the span's outcome; nil means success.
	SetStatus(err error)
	// WithField adds a key-value attribute to the span and returns a context
	// whose logger carries it as a field too.
	WithField(context.Context, string, any) context.Context
	// WithFields is WithField for several fields.
	WithFields(context.Context, log.Fields) context.Context
	// Logger returns a logger that also records its entries on the span.
	Logger() log.Logger
}

// Tracer starts spans.
type Tracer interface {
	// StartSpan starts a span named name as a child of the context's span,
	// and returns a context carrying it.
	StartSpan(context.Context, string) (context.Context, Span)
}

// T is the Tracer of a context that carries none. The trace/opencensus and
// trace/opentelemetry packages provide Tracers to set it to.
var T Tracer = openCensusTracer{}

// openCensusTracer starts OpenCensus spans, as trace/opencensus.Adapter does;
// it lives here too because that package imports this one.
type openCensusTracer struct{}

func (openCensusTracer) StartSpan(ctx context.Context, name string) (context.Context, Span) {
	ctx, s := ocspan.Start(ctx, name)
	return ctx, s
}

type tracerKey struct{}

// WithTracer returns a context whose spans are started by t.
func WithTracer(ctx context.Context, t Tracer) context.Context {
	return context.WithValue(ctx, tracerKey{}, t)
}

// StartSpan starts a span with the context's Tracer, or T.
func StartSpan(ctx context.Context, name string) (context.Context, Span) {
	if t, ok := ctx.Value(tracerKey{}).(Tracer); ok {
		return t.StartSpan(ctx, name)
	}
	return T.StartSpan(ctx, name)
}
