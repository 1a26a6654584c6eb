// Package klogv2 is the log package's Logger for k8s.io/klog/v2, under the
// prior virtual-kubelet project's name for it:
//
//	log.L = klogv2.New(nil)
//
// Info and Error entries are klog's structured entries (InfoS, ErrorS),
// with the fields as key-value pairs; Warn and Fatal, which klog has no
// structured form of, carry the fields after the message. Debug entries are
// written at verbosity DebugVerbosity.
package klogv2

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"k8s.io/klog/v2"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// DebugVerbosity is the klog verbosity (-v) at which Debug entries are
// written.
const DebugVerbosity = 4

// New returns a Logger writing to klog with fields on every entry; fields
// may be nil.
func New(fields log.Fields) log.Logger { return klogLogger{fields: maps.Clone(fields)} }

type klogLogger struct {
	fields log.Fields // never modified once set: With* copy it
	err    error      // WithError's error, passed to ErrorS as such
}

// depth skips the adapter's frames so klog names the caller's file and line.
const depth = 1

// keysAndValues returns the fields as klog's key-value list, keys sorted.
func (k klogLogger) keysAndValues() []any {
	kvs := make([]any, 0, 2*len(k.fields)+2)
	for _, key := range slices.Sorted(maps.Keys(k.fields)) {
		kvs = append(kvs, key, k.fields[key])
	}
	if k.err != nil {
		kvs = append(kvs, "err", k.err)
	}
	return kvs
}

// withFields appends the fields to msg, klog's key="value" style.
func (k klogLogger) withFields(msg string) string {
	var b strings.Builder
	b.WriteString(msg)
	kvs := k.keysAndValues()
	for i := 0; i < len(kvs); i += 2 {
		v := kvs[i+1]
		if s, ok := v.(string); ok {
			fmt.Fprintf(&b, " %s=%q", kvs[i], s)
		} else {
			fmt.Fprintf(&b, " %s=%v", kvs[i], v)
		}
	}
	return b.String()
}

func (k klogLogger) debug(msg func() string) {
	if v := klog.V(DebugVerbosity); v.Enabled() {
		v.InfoSDepth(depth+1, msg(), k.keysAndValues()...)
	}
}

func (k klogLogger) Debug(args ...any) { k.debug(func() string { return fmt.Sprint(args...) }) }
func (k klogLogger) Debugf(f string, args ...any) {
	k.debug(func() string { return fmt.Sprintf(f, args...) })
}
func (k klogLogger) Info(args ...any) {
	klog.InfoSDepth(depth, fmt.Sprint(args...), k.keysAndValues()...)
}
func (k klogLogger) Infof(f string, args ...any) {
	klog.InfoSDepth(depth, fmt.Sprintf(f, args...), k.keysAndValues()...)
}
func (k klogLogger) Warn(args ...any) {
	klog.WarningDepth(depth, k.withFields(fmt.Sprint(args...)))
}
func (k klogLogger) Warnf(f string, args ...any) {
	klog.WarningDepth(depth, k.withFields(fmt.Sprintf(f, args...)))
}
func (k klogLogger) Error(args ...any) { k.errorS(fmt.Sprint(args...)) }
func (k klogLogger) Errorf(f string, args ...any) {
	k.errorS(fmt.Sprintf(f, args...))
}
func (k klogLogger) Fatal(args ...any) {
	klog.FatalDepth(depth, k.withFields(fmt.Sprint(args...)))
}
func (k klogLogger) Fatalf(f string, args ...any) {
	klog.FatalDepth(depth, k.withFields(fmt.Sprintf(f, args...)))
}

// errorS writes an ErrorS entry; WithError's error is its err argument
// rather than a field.
func (k klogLogger) errorS(msg string) {
	err := k.err
	k.err = nil
	klog.ErrorSDepth(depth+1, err, msg, k.keysAndValues()...)
}

func (k klogLogger) WithField(key string, value any) log.Logger {
	return k.WithFields(log.Fields{key: value})
}

func (k klogLogger) WithFields(fields log.Fields) log.Logger {
	all := make(log.Fields, len(k.fields)+len(fields))
	maps.Copy(all, k.fields)
	maps.Copy(all, fields)
	return klogLogger{fields: all, err: k.err}
}

func (k klogLogger) WithError(err error) log.Logger {
	return klogLogger{fields: k.fields, err: err}
}
