// Package otlptest is an OTLP trace receiver for tests: the collector side
// of OTLP over gRPC (the protobuf TraceService) or over HTTP (protobuf POSTs
// to /v1/traces), on loopback, keeping what it receives.
package otlptest

import (
	"compress/gzip"
	"context"
	"encoding/hex"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync"

	collectorpb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	"google.golang.org/protobuf/proto"
)

// Receiver keeps the spans exporters send it.
type Receiver struct {
	endpoint string
	close    func()

	mu    sync.Mutex
	spans []*tracepb.ResourceSpans
}

func (r *Receiver) add(req *collectorpb.ExportTraceServiceRequest) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.spans = append(r.spans, req.ResourceSpans...)
}

// Endpoint is the value for OTEL_EXPORTER_OTLP_ENDPOINT: a plain-text
// http:// URL of the receiver.
func (r *Receiver) Endpoint() string { return r.endpoint }

// Close stops the receiver.
func (r *Receiver) Close() { r.close() }

// NewGRPC starts a receiver of OTLP over gRPC.
func NewGRPC() (*Receiver, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	srv := grpc.NewServer()
	r := &Receiver{endpoint: "http://" + l.Addr().String(), close: srv.Stop}
	collectorpb.RegisterTraceServiceServer(srv, traceService{r: r})
	go func() { _ = srv.Serve(l) }()
	return r, nil
}

type traceService struct {
	collectorpb.UnimplementedTraceServiceServer
	r *Receiver
}

func (s traceService) Export(_ context.Context, req *collectorpb.ExportTraceServiceRequest) (*collectorpb.ExportTraceServiceResponse, error) {
	s.r.add(req)
	return &collectorpb.ExportTraceServiceResponse{}, nil
}

// NewHTTP starts a receiver of OTLP over HTTP with protobuf bodies.
func NewHTTP() *Receiver {
	r := &Receiver{}
	mux := http.NewServeMux()
	mux.HandleFunc("POST /v1/traces", r.handle)
	srv := httptest.NewServer(mux)
	r.endpoint, r.close = srv.URL, srv.Close
	return r
}

func (r *Receiver) handle(w http.ResponseWriter, req *http.Request) {
	if ct := req.Header.Get("Content-Type"); ct != "application/x-protobuf" {
		http.Error(w, fmt.Sprintf("content type %q, want application/x-protobuf", ct), http.StatusUnsupportedMediaType)
		return
	}
	body := req.Body
	if req.Header.Get("Content-Encoding") == "gzip" {
		gz, err := gzip.NewReader(req.Body)
		if err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		body = gz
	}
	data, err := io.ReadAll(body)
	if err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	var msg collectorpb.ExportTraceServiceRequest
	if err := proto.Unmarshal(data, &msg); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	r.add(&msg)
	out, _ := proto.Marshal(&collectorpb.ExportTraceServiceResponse{})
	w.Header().Set("Content-Type", "application/x-protobuf")
	_, _ = w.Write(out)
}

// Span is a received span, IDs in hex, attribute values as text.
type Span struct {
	Resource   map[string]string
	Scope      string
	Name       string
	TraceID    string
	SpanID     string
	ParentID   string // empty for a root span
	Attributes map[string]string
	Status     tracepb.Status_StatusCode
	Events     []string
}

// Spans returns every span received so far.
func (r *Receiver) Spans() []Span {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []Span
	for _, rs := range r.spans {
		res := text(rs.GetResource().GetAttributes())
		for _, ss := range rs.ScopeSpans {
			for _, s := range ss.Spans {
				sp := Span{
					Resource: res, Scope: ss.GetScope().GetName(), Name: s.Name,
					TraceID: hex.EncodeToString(s.TraceId), SpanID: hex.EncodeToString(s.SpanId), ParentID: hex.EncodeToString(s.ParentSpanId),
					Attributes: text(s.Attributes), Status: s.GetStatus().GetCode(),
				}
				for _, e := range s.Events {
					sp.Events = append(sp.Events, e.Name)
				}
				out = append(out, sp)
			}
		}
	}
	return out
}

func text(kvs []*commonpb.KeyValue) map[string]string {
	m := make(map[string]string, len(kvs))
	for _, kv := range kvs {
		v := kv.GetValue()
		switch v.Value.(type) {
		case *commonpb.AnyValue_StringValue:
			m[kv.Key] = v.GetStringValue()
		case *commonpb.AnyValue_IntValue:
			m[kv.Key] = fmt.Sprint(v.GetIntValue())
		case *commonpb.AnyValue_BoolValue:
			m[kv.Key] = fmt.Sprint(v.GetBoolValue())
		case *commonpb.AnyValue_DoubleValue:
			m[kv.Key] = fmt.Sprint(v.GetDoubleValue())
		default:
			m[kv.Key] = v.String()
		}
	}
	return m
}
