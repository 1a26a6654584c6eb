package opentelemetry_test

import (
	"context"
	"testing"

	"github.com/sirupsen/logrus"
	"github.com/sirupsen/logrus/hooks/test"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace"
	"github.com/vkubelet/virtual-kubelet/node/trace/opentelemetry"
)

// TestSpansReachTheGlobalProvider: spans started through the adapter reach
// the global TracerProvider with their parent, attributes, events and
// status, and their fields reach the context's logger.
func TestSpansReachTheGlobalProvider(t *testing.T) {
	rec := tracetest.NewSpanRecorder()
	prev := otel.GetTracerProvider()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec)))
	t.Cleanup(func() { otel.SetTracerProvider(prev) })

	logger, hook := test.NewNullLogger()
	ctx := log.WithLogger(context.Background(), log.FromLogrus(logrus.NewEntry(logger)))
	ctx = trace.WithTracer(ctx, opentelemetry.Adapter{})
	ctx, parent := trace.StartSpan(ctx, "syncPod")
	ctx = parent.WithFields(ctx, log.Fields{"pod": "ns/web", "attempt": 2})
	_, child := trace.StartSpan(ctx, "provider.CreatePod")
	child.Logger().WithField("step", 3).Warn("slow")
	child.SetStatus(errdefs.NotFound("gone"))
	child.End()
	log.G(ctx).Info("in the parent")
	parent.SetStatus(nil)
	parent.End()

	spans := rec.Ended()
	if len(spans) != 2 {
		t.Fatalf("ended %d spans, want 2", len(spans))
	}
	c, p := spans[0], spans[1]
	if c.Name() != "provider.CreatePod" || p.Name() != "syncPod" {
		t.Fatalf("span names %q, %q", c.Name(), p.Name())
	}
	if c.Parent().SpanID() != p.SpanContext().SpanID() || c.SpanContext().TraceID() != p.SpanContext().TraceID() {
		t.Error("the child span is not linked to its parent")
	}
	if c.InstrumentationScope().Name != opentelemetry.ScopeName {
		t.Errorf("scope %q", c.InstrumentationScope().Name)
	}
	attrs := attribute.NewSet(p.Attributes()...)
	if v, _ := attrs.Value("pod"); v.AsString() != "ns/web" {
		t.Errorf("parent attributes %v", p.Attributes())
	}
	if v, _ := attrs.Value("attempt"); v.AsInt64() != 2 {
		t.Errorf("parent attributes %v", p.Attributes())
	}
	if p.Status().Code != codes.Ok || c.Status().Code != codes.Error || c.Status().Description != "gone" {
		t.Errorf("statuses: parent %+v, child %+v", p.Status(), c.Status())
	}
	var slow bool
	for _, e := range c.Events() {
		if e.Name == "slow" {
			set := attribute.NewSet(e.Attributes...)
			level, _ := set.Value("level")
			step, _ := set.Value("step")
			slow = level.AsString() == "warn" && step.AsInt64() == 3
		}
	}
	if !slow {
		t.Errorf("child events %+v lack the logged warning", c.Events())
	}
	entries := hook.AllEntries()
	if len(entries) != 2 || entries[0].Message != "slow" || entries[1].Data["pod"] != "ns/web" {
		t.Errorf("log entries: %+v", entries)
	}
}
