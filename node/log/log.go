// Package log carries a Logger in a context, so every layer logs with the
// fields (node, provider, pod) of the request it serves. The controllers
// pass such a context to provider calls: a provider that logs with
// log.G(ctx) gets the pod's fields for free.
//
// Logger is an interface, so a provider may plug in the logging library it
// prefers with WithLogger; the default, L, writes to logrus' standard logger,
// which the daemon configures.
package log

import (
	"context"

	"github.com/sirupsen/logrus"
)

// Fields are key-value pairs attached to a log entry.
type Fields map[string]any

// Logger writes leveled, structured log entries. The With* methods return a
// new Logger carrying the extra fields; the receiver is unchanged.
type Logger interface {
	Debug(...any)
	Debugf(string, ...any)
	Info(...any)
	Infof(string, ...any)
	Warn(...any)
	Warnf(string, ...any)
	Error(...any)
	Errorf(string, ...any)
	Fatal(...any)
	Fatalf(string, ...any)

	WithField(string, any) Logger
	WithFields(Fields) Logger
	WithError(error) Logger
}

// L is the Logger of a context that carries none: logrus' standard logger
// unless replaced.
var L Logger = FromLogrus(logrus.NewEntry(logrus.StandardLogger()))

type loggerKey struct{}

// WithLogger returns a context carrying logger.
func WithLogger(ctx context.Context, logger Logger) context.Context {
	return context.WithValue(ctx, loggerKey{}, logger)
}

// GetLogger returns the context's Logger, or L if it carries none.
func GetLogger(ctx context.Context) Logger {
	if l, ok := ctx.Value(loggerKey{}).(Logger); ok {
		return l
	}
	return L
}

// G is the short name of GetLogger used at call sites: log.G(ctx).Info(...).
var G = GetLogger

// WithFields returns a context whose logger has the given fields added;
// ctx itself when its logger has them already, with the same string
// values (a node's name, set by the caller and again by a controller), so
// that each of a thousand nodes does not keep a second logger.
func WithFields(ctx context.Context, fields Fields) context.Context {
	l := G(ctx)
	if h, ok := l.(logrusLogger); ok && h.hasStrings(fields) {
		return ctx
	}
	return WithLogger(ctx, l.WithFields(fields))
}

// hasStrings reports whether every field is a string the entry has.
func (l logrusLogger) hasStrings(fields Fields) bool {
	for k, v := range fields {
		want, ok := v.(string)
		if !ok {
			return false
		}
		if got, ok := l.Data[k].(string); !ok || got != want {
			return false
		}
	}
	return true
}

// FromLogrus adapts a logrus entry to Logger.
func FromLogrus(e *logrus.Entry) Logger { return logrusLogger{e} }

// logrusLogger is the Logger of a logrus entry; the embedded entry provides
// the level methods, the With* methods are rewrapped to return a Logger.
type logrusLogger struct{ *logrus.Entry }

func (l logrusLogger) WithField(key string, value any) Logger {
	return logrusLogger{l.Entry.WithField(key, value)}
}

func (l logrusLogger) WithFields(fields Fields) Logger {
	return logrusLogger{l.Entry.WithFields(logrus.Fields(fields))}
}

func (l logrusLogger) WithError(err error) Logger {
	return logrusLogger{l.Entry.WithError(err)}
}
