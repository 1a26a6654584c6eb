// Package jaegertest is a Jaeger collector for tests: it listens on
// loopback, accepts the thrift batches exporters POST to /api/traces and
// decodes them.
package jaegertest

import (
	"io"
	"net/http"
	"net/http/httptest"
	"sync"

	"github.com/uber/jaeger-client-go/thrift"
	"github.com/uber/jaeger-client-go/thrift-gen/jaeger"
)

// Collector receives spans.
type Collector struct {
	srv *httptest.Server

	mu      sync.Mutex
	batches []*jaeger.Batch
	errs    []error
}

// NewCollector starts a collector; Close stops it.
func NewCollector() *Collector {
	c := &Collector{}
	c.srv = httptest.NewServer(http.HandlerFunc(c.handle))
	return c
}

// Endpoint is the URL to give an exporter as its collector endpoint.
func (c *Collector) Endpoint() string { return c.srv.URL + "/api/traces" }

// Close stops the collector.
func (c *Collector) Close() { c.srv.Close() }

func (c *Collector) handle(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err == nil {
		batch := jaeger.NewBatch()
		buf := thrift.NewTMemoryBuffer()
		_, _ = buf.Write(body)
		err = batch.Read(thrift.NewTBinaryProtocolTransport(buf))
		if err == nil {
			c.mu.Lock()
			c.batches = append(c.batches, batch)
			c.mu.Unlock()
			w.WriteHeader(http.StatusAccepted)
			return
		}
	}
	c.mu.Lock()
	c.errs = append(c.errs, err)
	c.mu.Unlock()
	http.Error(w, err.Error(), http.StatusBadRequest)
}

// Span is a received span with its process.
type Span struct {
	Service string
	Process map[string]string
	Name    string
	Tags    map[string]string
}

// Spans returns every span received so far, and the decoding errors.
func (c *Collector) Spans() ([]Span, []error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var out []Span
	for _, b := range c.batches {
		process := tags(b.Process.Tags)
		for _, s := range b.Spans {
			out = append(out, Span{Service: b.Process.ServiceName, Process: process, Name: s.OperationName, Tags: tags(s.Tags)})
		}
	}
	return out, append([]error(nil), c.errs...)
}

func tags(in []*jaeger.Tag) map[string]string {
	out := map[string]string{}
	for _, t := range in {
		if t.VStr != nil {
			out[t.Key] = *t.VStr
		}
	}
	return out
}
