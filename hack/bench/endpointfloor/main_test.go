package main

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"
)

// The scraper reaches every endpoint with its certificate, over HTTP/2 or
// HTTP/1.1 as asked, and an endpoint refuses a client without one.
func TestScraperReachesEveryEndpoint(t *testing.T) {
	for _, http1 := range []bool{false, true} {
		t.Run(fmt.Sprintf("http1=%v", http1), func(t *testing.T) {
			e, p, err := serve(4, http1)
			if err != nil {
				t.Fatal(err)
			}
			p.Every = 40 * time.Millisecond
			stop := make(chan struct{})
			done := make(chan error, 1)
			go func() { done <- p.scrape(stop) }()
			deadline := time.Now().Add(10 * time.Second)
			for e.served.Load() < 3*int64(len(p.Ports)) && time.Now().Before(deadline) {
				time.Sleep(10 * time.Millisecond)
			}
			close(stop)
			if err := <-done; err != nil {
				t.Fatal(err)
			}
			if got := e.served.Load(); got < 3*int64(len(p.Ports)) {
				t.Fatalf("served %d requests in 10 s, want %d", got, 3*len(p.Ports))
			}

			ca, _ := x509.ParseCertificate(p.CA)
			roots := x509.NewCertPool()
			roots.AddCert(ca)
			anonymous := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
			resp, err := anonymous.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics/resource", p.Ports[0]))
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusUnauthorized || e.refused.Load() != 1 {
				t.Fatalf("no certificate: %s, %d refused", resp.Status, e.refused.Load())
			}
			if served, h2 := e.served.Load(), e.overHTTP2.Load(); (http1 && h2 != 0) || (!http1 && h2 != served) {
				t.Errorf("%d of %d requests over HTTP/2", h2, served)
			}
			if r := e.report(); !strings.Contains(r, "VmRSS") || !strings.Contains(r, "stacks") {
				t.Errorf("report: %q", r)
			}
		})
	}
}
