package opencensus_test

import (
	"context"
	"fmt"

	octrace "go.opencensus.io/trace"

	"github.com/vkubelet/virtual-kubelet/node/trace"
	"github.com/vkubelet/virtual-kubelet/node/trace/opencensus"
)

type printExporter struct{}

func (printExporter) ExportSpan(s *octrace.SpanData) {
	fmt.Println(s.Name, s.Attributes["pod"], s.Status.Code)
}

func Example() {
	octrace.RegisterExporter(printExporter{})
	defer octrace.UnregisterExporter(printExporter{})
	octrace.ApplyConfig(octrace.Config{DefaultSampler: octrace.AlwaysSample()})

	ctx := trace.WithTracer(context.Background(), opencensus.Adapter{})
	ctx, span := trace.StartSpan(ctx, "provider.CreatePod")
	_ = span.WithField(ctx, "pod", "default/web")
	span.SetStatus(nil)
	span.End()
	// Output: provider.CreatePod default/web 0
}
