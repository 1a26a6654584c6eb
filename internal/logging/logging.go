// Package logging configures logrus for the daemon and routes klog, which
// client-go and the Kubernetes libraries log through, into it.
package logging

import (
	"flag"
	"fmt"
	"io"
	stdlog "log"
	"os"
	"strings"

	"github.com/go-logr/logr"
	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"
)

// Levels are the accepted --log-level values.
var Levels = []string{"trace", "debug", "info", "warn", "error", "fatal", "panic"}

// Configure sets logrus' level and output, and makes klog and the standard
// library's logger (net/http's server errors) log through it. Lines reach
// out through a queue (see lineQueue); flush writes out the lines queued,
// and later lines are written as they come: the daemon calls it before it
// exits.
func Configure(level string, out io.Writer) (flush func(), err error) {
	lvl, err := logrus.ParseLevel(level)
	if err != nil {
		return nil, fmt.Errorf("--log-level: %q is not one of %s", level, strings.Join(Levels, ", "))
	}
	// klog decides V(n) against its own -v before reaching the sink.
	fs := flag.NewFlagSet("klog", flag.ContinueOnError)
	klog.InitFlags(fs)
	v := "0"
	switch {
	case lvl >= logrus.TraceLevel:
		v = "10"
	case lvl >= logrus.DebugLevel:
		v = "4"
	}
	if err := fs.Set("v", v); err != nil {
		return nil, err
	}
	logrus.SetLevel(lvl)
	if out == nil {
		out = os.Stderr
	}
	q := newLineQueue(out, queuedLines)
	logrus.SetOutput(q)
	logrus.SetFormatter(&logrus.TextFormatter{FullTimestamp: true})
	klog.SetLogger(logr.New(&klogSink{entry: logrus.NewEntry(logrus.StandardLogger())}))
	stdlog.SetFlags(0)
	stdlog.SetOutput(stdlibWriter{})
	return q.flush, nil
}

// stdlibWriter takes the standard library logger's lines (net/http logs a
// server's connection errors there) to logrus at info, as the Kubernetes
// components take them to klog. A failed TLS handshake is a client's
// business (a scanner, a client giving up under load) and is logged at
// debug, as the API server does; a storm of them must not flood the log.
type stdlibWriter struct{}

func (stdlibWriter) Write(p []byte) (int, error) {
	msg := strings.TrimSuffix(string(p), "\n")
	lvl := logrus.InfoLevel
	if strings.Contains(msg, "TLS handshake error") {
		lvl = logrus.DebugLevel
	}
	logrus.WithField("logger", "stdlib").Log(lvl, msg)
	return len(p), nil
}

// klogSink is a logr sink writing to logrus. klog's verbosity maps onto
// logrus levels: V(0) is info, V(1) to V(4) debug, beyond is trace.
type klogSink struct {
	entry *logrus.Entry
	name  string
}

func (s *klogSink) Init(logr.RuntimeInfo) {}

func level(v int) logrus.Level {
	switch {
	case v == 0:
		return logrus.InfoLevel
	case v <= 4:
		return logrus.DebugLevel
	}
	return logrus.TraceLevel
}

func (s *klogSink) Enabled(v int) bool { return s.entry.Logger.IsLevelEnabled(level(v)) }

func (s *klogSink) Info(v int, msg string, kv ...any) {
	s.with(kv).Log(level(v), msg)
}

func (s *klogSink) Error(err error, msg string, kv ...any) {
	s.with(kv).WithError(err).Error(msg)
}

func (s *klogSink) with(kv []any) *logrus.Entry {
	fields := logrus.Fields{}
	if s.name != "" {
		fields["logger"] = s.name
	}
	for i := 0; i+1 < len(kv); i += 2 {
		fields[fmt.Sprint(kv[i])] = kv[i+1]
	}
	return s.entry.WithFields(fields)
}

func (s *klogSink) WithValues(kv ...any) logr.LogSink {
	return &klogSink{entry: s.with(kv), name: s.name}
}

func (s *klogSink) WithName(name string) logr.LogSink {
	if s.name != "" {
		name = s.name + "." + name
	}
	return &klogSink{entry: s.entry, name: name}
}
