package trace

import (
	"context"
	"errors"
	"fmt"

	octrace "go.opencensus.io/trace"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// openCensusTracer starts OpenCensus spans; whatever exporter the program
// registered with go.opencensus.io/trace receives them.
type openCensusTracer struct{}

func (openCensusTracer) StartSpan(ctx context.Context, name string) (context.Context, Span) {
	ctx, s := octrace.StartSpan(ctx, name)
	return ctx, &openCensusSpan{s: s, logger: log.G(ctx)}
}

type openCensusSpan struct {
	s      *octrace.Span
	logger log.Logger
}

func (s *openCensusSpan) End() { s.s.End() }

func (s *openCensusSpan) SetStatus(err error) {
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

func (s *openCensusSpan) WithField(ctx context.Context, key string, value any) context.Context {
	s.s.AddAttributes(attribute(key, value))
	return log.WithLogger(ctx, log.G(ctx).WithField(key, value))
}

func (s *openCensusSpan) WithFields(ctx context.Context, fields log.Fields) context.Context {
	attrs := make([]octrace.Attribute, 0, len(fields))
	for k, v := range fields {
		attrs = append(attrs, attribute(k, v))
	}
	s.s.AddAttributes(attrs...)
	return log.WithFields(ctx, fields)
}

// attribute keeps the type of booleans and integers; anything else is
// recorded as its fmt representation.
func attribute(key string, value any) octrace.Attribute {
	switch v := value.(type) {
	case string:
		return octrace.StringAttribute(key, v)
	case bool:
		return octrace.BoolAttribute(key, v)
	case int:
		return octrace.Int64Attribute(key, int64(v))
	case int32:
		return octrace.Int64Attribute(key, int64(v))
	case int64:
		return octrace.Int64Attribute(key, v)
	case float64:
		return octrace.Float64Attribute(key, v)
	}
	return octrace.StringAttribute(key, fmt.Sprint(value))
}

func (s *openCensusSpan) Logger() log.Logger {
	return &spanLogger{span: s.s, Logger: s.logger}
}

// spanLogger writes through the context's logger and records each entry as
// an annotation of the span, with the fields added by its With* methods.
type spanLogger struct {
	log.Logger
	span  *octrace.Span
	attrs []octrace.Attribute
}

func (l *spanLogger) annotate(level, msg string) {
	attrs := append([]octrace.Attribute{octrace.StringAttribute("level", level)}, l.attrs...)
	l.span.Annotate(attrs, msg)
}

func (l *spanLogger) Debug(args ...any) {
	l.annotate("debug", fmt.Sprint(args...))
	l.Logger.Debug(args...)
}
func (l *spanLogger) Debugf(f string, args ...any) {
	l.annotate("debug", fmt.Sprintf(f, args...))
	l.Logger.Debugf(f, args...)
}
func (l *spanLogger) Info(args ...any) {
	l.annotate("info", fmt.Sprint(args...))
	l.Logger.Info(args...)
}
func (l *spanLogger) Infof(f string, args ...any) {
	l.annotate("info", fmt.Sprintf(f, args...))
	l.Logger.Infof(f, args...)
}
func (l *spanLogger) Warn(args ...any) {
	l.annotate("warn", fmt.Sprint(args...))
	l.Logger.Warn(args...)
}
func (l *spanLogger) Warnf(f string, args ...any) {
	l.annotate("warn", fmt.Sprintf(f, args...))
	l.Logger.Warnf(f, args...)
}
func (l *spanLogger) Error(args ...any) {
	l.annotate("error", fmt.Sprint(args...))
	l.Logger.Error(args...)
}
func (l *spanLogger) Errorf(f string, args ...any) {
	l.annotate("error", fmt.Sprintf(f, args...))
	l.Logger.Errorf(f, args...)
}
func (l *spanLogger) Fatal(args ...any) {
	l.annotate("fatal", fmt.Sprint(args...))
	l.Logger.Fatal(args...)
}
func (l *spanLogger) Fatalf(f string, args ...any) {
	l.annotate("fatal", fmt.Sprintf(f, args...))
	l.Logger.Fatalf(f, args...)
}

func (l *spanLogger) with(next log.Logger, attrs ...octrace.Attribute) log.Logger {
	all := append(append([]octrace.Attribute(nil), l.attrs...), attrs...)
	return &spanLogger{Logger: next, span: l.span, attrs: all}
}

func (l *spanLogger) WithField(key string, value any) log.Logger {
	return l.with(l.Logger.WithField(key, value), attribute(key, value))
}

func (l *spanLogger) WithFields(fields log.Fields) log.Logger {
	attrs := make([]octrace.Attribute, 0, len(fields))
	for k, v := range fields {
		attrs = append(attrs, attribute(k, v))
	}
	return l.with(l.Logger.WithFields(fields), attrs...)
}

func (l *spanLogger) WithError(err error) log.Logger {
	return l.with(l.Logger.WithError(err), octrace.StringAttribute("error", fmt.Sprint(err)))
}
