package opentelemetry_test

import (
	"context"
	"fmt"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/vkubelet/virtual-kubelet/node/trace"
	"github.com/vkubelet/virtual-kubelet/node/trace/opentelemetry"
)

func Example() {
	// A program installs its TracerProvider (here one that keeps spans in
	// memory; usually one with an OTLP exporter) and makes the adapter the
	// default Tracer.
	spans := tracetest.NewSpanRecorder()
	prev, prevT := otel.GetTracerProvider(), trace.T
	defer func() { otel.SetTracerProvider(prev); trace.T = prevT }()
	otel.SetTracerProvider(sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(spans)))
	trace.T = opentelemetry.Adapter{}

	ctx, span := trace.StartSpan(context.Background(), "provider.CreatePod")
	_ = span.WithField(ctx, "pod", "default/web")
	span.End()

	for _, s := range spans.Ended() {
		for _, kv := range s.Attributes() {
			fmt.Println(s.Name(), kv.Key, kv.Value.String())
		}
	}
	// Output: provider.CreatePod pod default/web
}
