package trace

import (
	"context"
	"errors"
	"sync"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	octrace "go.opencensus.io/trace"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

type recordingExporter struct {
	mu    sync.Mutex
	spans []*octrace.SpanData
}

func (e *recordingExporter) ExportSpan(s *octrace.SpanData) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.spans = append(e.spans, s)
}

// TestOpenCensusDefault: spans of the default Tracer reach OpenCensus
// exporters with their fields and a status code by error kind, and the
// fields reach the context's logger.
func TestOpenCensusDefault(t *testing.T) {
	exp := &recordingExporter{}
	octrace.RegisterExporter(exp)
	defer octrace.UnregisterExporter(exp)
	octrace.ApplyConfig(octrace.Config{DefaultSampler: octrace.AlwaysSample()})

	logger, hook := test.NewNullLogger()
	ctx := log.WithLogger(context.Background(), log.FromLogrus(logrus.NewEntry(logger)))
	ctx, span := StartSpan(ctx, "provider.CreatePod")
	ctx = span.WithField(ctx, "pod", "ns/web")
	log.G(ctx).Info("in the span")
	span.Logger().WithField("step", 2).Warn("annotated")
	span.SetStatus(errdefs.NotFound("gone"))
	span.End()

	if len(exp.spans) != 1 {
		t.Fatalf("exported %d spans, want 1", len(exp.spans))
	}
	s := exp.spans[0]
	if s.Name != "provider.CreatePod" || s.Attributes["pod"] != "ns/web" || s.Status.Code != octrace.StatusCodeNotFound {
		t.Errorf("span: name %q, attributes %v, status %+v", s.Name, s.Attributes, s.Status)
	}
	if len(s.Annotations) != 1 || s.Annotations[0].Message != "annotated" || s.Annotations[0].Attributes["step"] != int64(2) {
		t.Errorf("annotations: %+v", s.Annotations)
	}
	entries := hook.AllEntries()
	if len(entries) != 2 || entries[0].Data["pod"] != "ns/web" || entries[1].Message != "annotated" {
		t.Errorf("log entries: %+v", entries)
	}
}

type fakeTracer struct{ names []string }

func (f *fakeTracer) StartSpan(ctx context.Context, name string) (context.Context, Span) {
	f.names = append(f.names, name)
	return T.StartSpan(ctx, name)
}

func TestWithTracer(t *testing.T) {
	f := &fakeTracer{}
	ctx := WithTracer(context.Background(), f)
	_, span := StartSpan(ctx, "a")
	span.SetStatus(errors.New("x"))
	span.End()
	if len(f.names) != 1 || f.names[0] != "a" {
		t.Errorf("context's tracer started %v, want [a]", f.names)
	}
}
