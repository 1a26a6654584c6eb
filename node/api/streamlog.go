package api

import (
	"context"
	"errors"
	"net"
	"slices"

	"github.com/go-logr/logr"
	"k8s.io/klog/v2"
)

// closedConnVerbosity is the klog verbosity a session's own close is
// logged at: debug, where the daemon maps V(1) to V(4).
const closedConnVerbosity = 4

// withQuietClose puts in ctx a klog logger, taken from ctx, that logs the
// streaming libraries' errors caused by the session's own close at debug.
// The WebSocket server (wsstream) reads until the connection closes and
// logs "Error on socket receive" at error level for anything but io.EOF;
// when a session ends normally, the server closes the connection under
// that read, so every normal exec, attach and port-forward ended with an
// error line. Other errors (a reset, a timeout, a protocol error) stay
// errors.
func withQuietClose(ctx context.Context) context.Context {
	sink := klog.FromContext(ctx).GetSink()
	if sink == nil { // logr.Discard: nothing to quiet
		return ctx
	}
	return klog.NewContext(ctx, logr.New(&quietCloseSink{LogSink: sink}))
}

// quietCloseSink is a logr.LogSink that turns errors wrapping
// net.ErrClosed into debug entries.
type quietCloseSink struct {
	logr.LogSink
}

// Init does nothing: the wrapped sink was initialized by its own logger.
func (s *quietCloseSink) Init(logr.RuntimeInfo) {}

func (s *quietCloseSink) Error(err error, msg string, kv ...any) {
	if errors.Is(err, net.ErrClosed) {
		if s.LogSink.Enabled(closedConnVerbosity) {
			s.LogSink.Info(closedConnVerbosity, msg, slices.Concat(kv, []any{"err", err.Error()})...)
		}
		return
	}
	s.LogSink.Error(err, msg, kv...)
}

func (s *quietCloseSink) WithValues(kv ...any) logr.LogSink {
	return &quietCloseSink{LogSink: s.LogSink.WithValues(kv...)}
}

func (s *quietCloseSink) WithName(name string) logr.LogSink {
	return &quietCloseSink{LogSink: s.LogSink.WithName(name)}
}
