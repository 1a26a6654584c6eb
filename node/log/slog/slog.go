// Package slog is the log package's Logger for a log/slog Logger, under the
// prior virtual-kubelet project's name for it:
//
//	log.L = vkslog.FromSlog(slog.Default())
//
// Fields become the record's attributes; Warn and Error map to slog's
// levels, Fatal logs at LevelFatal and then exits.
package slog

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"runtime"
	"time"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// LevelFatal is the level of Fatal and Fatalf entries, above slog.LevelError.
const LevelFatal = slog.Level(12)

// FromSlog returns a Logger writing to logger.
func FromSlog(logger *slog.Logger) log.Logger { return slogLogger{logger} }

type slogLogger struct{ l *slog.Logger }

// write logs msg at level, with the source position of the adapter's
// caller rather than the adapter's own.
func (s slogLogger) write(level slog.Level, msg func() string) {
	ctx := context.Background()
	if !s.l.Enabled(ctx, level) {
		return
	}
	var pcs [1]uintptr
	runtime.Callers(3, pcs[:]) // runtime.Callers, write, the Logger method
	r := slog.NewRecord(time.Now(), level, msg(), pcs[0])
	_ = s.l.Handler().Handle(ctx, r)
}

func sprint(args []any) func() string { return func() string { return fmt.Sprint(args...) } }

func sprintf(f string, args []any) func() string {
	return func() string { return fmt.Sprintf(f, args...) }
}

func (s slogLogger) Debug(args ...any)            { s.write(slog.LevelDebug, sprint(args)) }
func (s slogLogger) Debugf(f string, args ...any) { s.write(slog.LevelDebug, sprintf(f, args)) }
func (s slogLogger) Info(args ...any)             { s.write(slog.LevelInfo, sprint(args)) }
func (s slogLogger) Infof(f string, args ...any)  { s.write(slog.LevelInfo, sprintf(f, args)) }
func (s slogLogger) Warn(args ...any)             { s.write(slog.LevelWarn, sprint(args)) }
func (s slogLogger) Warnf(f string, args ...any)  { s.write(slog.LevelWarn, sprintf(f, args)) }
func (s slogLogger) Error(args ...any)            { s.write(slog.LevelError, sprint(args)) }
func (s slogLogger) Errorf(f string, args ...any) { s.write(slog.LevelError, sprintf(f, args)) }

func (s slogLogger) Fatal(args ...any) {
	s.write(LevelFatal, sprint(args))
	os.Exit(1)
}

func (s slogLogger) Fatalf(f string, args ...any) {
	s.write(LevelFatal, sprintf(f, args))
	os.Exit(1)
}

func (s slogLogger) WithField(key string, value any) log.Logger {
	return slogLogger{s.l.With(key, value)}
}

func (s slogLogger) WithFields(fields log.Fields) log.Logger {
	args := make([]any, 0, 2*len(fields))
	for k, v := range fields {
		args = append(args, k, v)
	}
	return slogLogger{s.l.With(args...)}
}

func (s slogLogger) WithError(err error) log.Logger {
	return slogLogger{s.l.With("error", err)}
}
