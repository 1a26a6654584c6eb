// Package opencensus is the trace package's Tracer for OpenCensus, under the
// prior virtual-kubelet project's name for it. It is what trace.T is by
// default; set it explicitly to restore OpenCensus after another Tracer, or
// to make the choice visible:
//
//	trace.T = opencensus.Adapter{}
//
// Spans go to the exporters registered with go.opencensus.io/trace.
package opencensus

import (
	"context"

	"github.com/vkubelet/virtual-kubelet/node/trace"
	"github.com/vkubelet/virtual-kubelet/node/trace/internal/ocspan"
)

// Adapter starts OpenCensus spans.
type Adapter struct{}

// StartSpan starts a span named name as a child of the context's span, and
// returns a context carrying it.
func (Adapter) StartSpan(ctx context.Context, name string) (context.Context, trace.Span) {
	ctx, s := ocspan.Start(ctx, name)
	return ctx, s
}
