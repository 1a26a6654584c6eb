// Package ocspan implements the trace package's Span with OpenCensus. It is
// shared by trace's default Tracer and the trace/opencensus adapter, and
// returns a concrete type so that trace can import it.
package ocspan

import (
	"context"
	"errors"

	octrace "go.opencensus.io/trace"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace/internal/spanlog"
)

// Span is an OpenCensus span with the trace package's Span methods.
type Span struct {
	s      *octrace.Span
	logger log.Logger
}

// Start starts an OpenCensus span named name as a child of the context's
// span; whatever exporter the program registered with go.opencensus.io/trace
// receives it.
func Start(ctx context.Context, name string) (context.Context, *Span) {
	ctx, s := octrace.StartSpan(ctx, name)
	return ctx, &Span{s: s, logger: log.G(ctx)}
}

// End finishes the span.
func (s *Span) End() { s.s.End() }

// SetStatus records err as the span's outcome, nil meaning OK.
func (s *Span) SetStatus(err error) {
	if err == nil {
		s.s.SetStatus(octrace.Status{Code: octrace.StatusCodeOK})
		return
	}
	s.s.SetStatus(octrace.Status{Code: statusCode(err), Message: err.Error()})
}

// statusCode maps an error to the closest OpenCensus (gRPC) status code.
func statusCode(err error) int32 {
	switch {
	case errdefs.IsNotFound(err):
		return octrace.StatusCodeNotFound
	case errdefs.IsInvalidInput(err):
		return octrace.StatusCodeInvalidArgument
	case errors.Is(err, context.Canceled):
		return octrace.StatusCodeCancelled
	case errors.Is(err, context.DeadlineExceeded):
		return octrace.StatusCodeDeadlineExceeded
	}
	return octrace.StatusCodeUnknown
}

// WithField adds an attribute to the span and a field to the context's
// logger.
func (s *Span) WithField(ctx context.Context, key string, value any) context.Context {
	s.s.AddAttributes(attrs.Of(key, value))
	return log.WithLogger(ctx, log.G(ctx).WithField(key, value))
}

// WithFields is WithField for several fields.
func (s *Span) WithFields(ctx context.Context, fields log.Fields) context.Context {
	s.s.AddAttributes(attrs.All(fields)...)
	return log.WithFields(ctx, fields)
}

// Logger returns a logger that also records its entries as annotations of
// the span.
func (s *Span) Logger() log.Logger {
	return spanlog.New(s.logger, func(level, msg string, fields log.Fields) {
		s.s.Annotate(append([]octrace.Attribute{octrace.StringAttribute("level", level)}, attrs.All(fields)...), msg)
	})
}

// attrs makes OpenCensus attributes of log fields.
var attrs = spanlog.Attrs[octrace.Attribute]{
	String:  octrace.StringAttribute,
	Bool:    octrace.BoolAttribute,
	Int64:   octrace.Int64Attribute,
	Float64: octrace.Float64Attribute,
}
