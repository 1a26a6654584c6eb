// Package spanlog is the Logger a span returns: it writes each entry through
// the context's logger and records it on the span too, so a trace shows what
// was logged inside it. Each tracing backend supplies how an entry is
// recorded.
package spanlog

import (
	"fmt"
	"maps"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// Recorder records one log entry on a span: its level ("debug" to
// "fatal"), its message, and the fields added through the logger's With*
// methods.
type Recorder func(level, msg string, fields log.Fields)

// New returns a Logger writing through next and recording through rec.
func New(next log.Logger, rec Recorder) log.Logger {
	return &logger{next: next, rec: rec}
}

type logger struct {
	next   log.Logger
	rec    Recorder
	fields log.Fields // never modified once set: With* copy it
}

func (l *logger) record(level, msg string) { l.rec(level, msg, l.fields) }

func (l *logger) Debug(args ...any) { l.record("debug", fmt.Sprint(args...)); l.next.Debug(args...) }
func (l *logger) Info(args ...any)  { l.record("info", fmt.Sprint(args...)); l.next.Info(args...) }
func (l *logger) Warn(args ...any)  { l.record("warn", fmt.Sprint(args...)); l.next.Warn(args...) }
func (l *logger) Error(args ...any) { l.record("error", fmt.Sprint(args...)); l.next.Error(args...) }
func (l *logger) Fatal(args ...any) { l.record("fatal", fmt.Sprint(args...)); l.next.Fatal(args...) }

func (l *logger) Debugf(f string, args ...any) {
	l.record("debug", fmt.Sprintf(f, args...))
	l.next.Debugf(f, args...)
}
func (l *logger) Infof(f string, args ...any) {
	l.record("info", fmt.Sprintf(f, args...))
	l.next.Infof(f, args...)
}
func (l *logger) Warnf(f string, args ...any) {
	l.record("warn", fmt.Sprintf(f, args...))
	l.next.Warnf(f, args...)
}
func (l *logger) Errorf(f string, args ...any) {
	l.record("error", fmt.Sprintf(f, args...))
	l.next.Errorf(f, args...)
}
func (l *logger) Fatalf(f string, args ...any) {
	l.record("fatal", fmt.Sprintf(f, args...))
	l.next.Fatalf(f, args...)
}

// with returns a logger writing through next with fields added to the
// recorded ones.
func (l *logger) with(next log.Logger, fields log.Fields) log.Logger {
	all := make(log.Fields, len(l.fields)+len(fields))
	maps.Copy(all, l.fields)
	maps.Copy(all, fields)
	return &logger{next: next, rec: l.rec, fields: all}
}

func (l *logger) WithField(key string, value any) log.Logger {
	return l.with(l.next.WithField(key, value), log.Fields{key: value})
}

func (l *logger) WithFields(fields log.Fields) log.Logger {
	return l.with(l.next.WithFields(fields), fields)
}

func (l *logger) WithError(err error) log.Logger {
	return l.with(l.next.WithError(err), log.Fields{"error": fmt.Sprint(err)})
}
