// Package log carries a logrus entry in a context, so every layer logs with
// the fields (node, provider, pod) of the request it serves. The controllers
// pass such a context to provider calls: a provider that logs with
// log.G(ctx) gets the pod's fields for free.
package log

import (
	"context"

	"github.com/sirupsen/logrus"
)

type loggerKey struct{}

// WithLogger returns a context carrying l.
func WithLogger(ctx context.Context, l *logrus.Entry) context.Context {
	return context.WithValue(ctx, loggerKey{}, l)
}

// G returns the context's logger, or one on logrus' standard logger.
func G(ctx context.Context) *logrus.Entry {
	if l, ok := ctx.Value(loggerKey{}).(*logrus.Entry); ok {
		return l
	}
	return logrus.NewEntry(logrus.StandardLogger())
}

// WithFields returns a context whose logger has the given fields added.
func WithFields(ctx context.Context, fields logrus.Fields) context.Context {
	return WithLogger(ctx, G(ctx).WithFields(fields))
}
