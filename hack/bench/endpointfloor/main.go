// Command endpointfloor measures what N kubelet-like HTTPS endpoints cost a
// Go process and nothing else: each endpoint on its own port, verifying
// client certificates as the kubelet's x509 authenticator does, and held
// open by a scraper that asks each of them once an interval, as
// metrics-server does a node. It is the floor under the daemon's memory with
// a thousand nodes, each with its own kubelet API (BENCHMARKS.md, "1,000
// idle nodes"):
//
//	go run ./hack/bench/endpointfloor -n 1000 -for 2m
//
// The scraper runs in a child process so that its memory is not counted.
// Every 15 s the server prints its goroutines, heap, stacks and RSS.
package main

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log"
	"net"
	"net/http"
	"os"
	"os/exec"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testpki"
)

func main() {
	n := flag.Int("n", 1000, "endpoints")
	every := flag.Duration("every", 10*time.Second, "how often the scraper asks each endpoint (metrics-server's resolution)")
	http1 := flag.Bool("http1", false, "serve HTTP/1.1 only (no HTTP/2 by ALPN)")
	runFor := flag.Duration("for", 2*time.Minute, "how long to run")
	scraper := flag.Bool("scraper", false, "internal: be the scraper, reading its plan from stdin")
	flag.Parse()
	if *scraper {
		var p plan
		if err := json.NewDecoder(os.Stdin).Decode(&p); err != nil {
			log.Fatalf("scraper: reading the plan: %v", err)
		}
		log.Fatal(p.scrape(nil))
	}
	if *n < 1 || *every <= 0 || *runFor <= 0 {
		log.Fatal("-n, -every and -for must be positive")
	}
	e, p, err := serve(*n, *http1)
	if err != nil {
		log.Fatal(err)
	}
	p.Every = *every
	self, err := os.Executable()
	if err != nil {
		log.Fatal(err)
	}
	sc := exec.Command(self, "-scraper")
	sc.Stdout, sc.Stderr = os.Stderr, os.Stderr
	in, _ := json.Marshal(p)
	sc.Stdin = strings.NewReader(string(in))
	if err := sc.Start(); err != nil {
		log.Fatal(err)
	}
	defer sc.Process.Kill() //nolint:errcheck
	fmt.Printf("%d endpoints (HTTP/2: %v), scraped every %s\n", *n, !*http1, *every)
	end := time.After(*runFor)
	tick := time.NewTicker(15 * time.Second)
	defer tick.Stop()
	for {
		select {
		case <-tick.C:
			fmt.Println(e.report())
		case <-end:
			return
		}
	}
}

// endpoints are the servers of one process and what they answered.
type endpoints struct {
	served, refused atomic.Int64
	// overHTTP2 counts the served requests that came over HTTP/2.
	overHTTP2 atomic.Int64
}

// plan is what the scraper needs: where the endpoints are, its identity
// and the CA to trust.
type plan struct {
	Ports  []int
	Every  time.Duration
	CA     []byte // DER
	Cert   []byte // DER
	Key    []byte // PKCS #8 DER
	HTTP11 bool
}

// serve starts n endpoints on loopback ports the kernel picks. Each answers
// a request with a client certificate of the CA with a body the size of a
// node's /metrics/resource, and refuses one without.
func serve(n int, http1 bool) (*endpoints, *plan, error) {
	ca, err := testpki.NewAuthority("endpointfloor CA", 24*time.Hour)
	if err != nil {
		return nil, nil, err
	}
	server, err := ca.Issue(testpki.Leaf{CommonName: "node", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	if err != nil {
		return nil, nil, err
	}
	client, err := ca.Issue(testpki.Leaf{CommonName: "scraper", Client: true})
	if err != nil {
		return nil, nil, err
	}
	keyDER, err := client.KeyDER()
	if err != nil {
		return nil, nil, err
	}
	body := []byte(strings.Repeat("x", 1500))
	e := &endpoints{}
	handler := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) == 0 {
			e.refused.Add(1)
			http.Error(w, "Unauthorized", http.StatusUnauthorized)
			return
		}
		e.served.Add(1)
		if r.ProtoMajor == 2 {
			e.overHTTP2.Add(1)
		}
		_, _ = w.Write(body)
	})
	p := &plan{CA: ca.Cert.Raw, Cert: client.Cert.Raw, Key: keyDER, HTTP11: http1}
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, nil, err
		}
		srv := &http.Server{
			Handler:           handler,
			ReadHeaderTimeout: 30 * time.Second,
			TLSConfig: &tls.Config{Certificates: []tls.Certificate{server.TLS()}, ClientCAs: ca.Pool(),
				ClientAuth: tls.VerifyClientCertIfGiven, MinVersion: tls.VersionTLS12},
		}
		if http1 {
			srv.TLSNextProto = map[string]func(*http.Server, *tls.Conn, http.Handler){}
		}
		go func() {
			if err := srv.ServeTLS(l, "", ""); !errors.Is(err, http.ErrServerClosed) {
				log.Print(err)
			}
		}()
		p.Ports = append(p.Ports, l.Addr().(*net.TCPAddr).Port)
	}
	return e, p, nil
}

// scrape asks each endpoint in turn, spread over the interval, through one
// transport that keeps a connection to each, until stop is closed (never,
// when nil).
func (p *plan) scrape(stop <-chan struct{}) error {
	ca, err := x509.ParseCertificate(p.CA)
	if err != nil {
		return err
	}
	key, err := x509.ParsePKCS8PrivateKey(p.Key)
	if err != nil {
		return err
	}
	roots := x509.NewCertPool()
	roots.AddCert(ca)
	tr := &http.Transport{
		TLSClientConfig:   &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{{Certificate: [][]byte{p.Cert}, PrivateKey: key}}},
		ForceAttemptHTTP2: !p.HTTP11,
		IdleConnTimeout:   0,
	}
	c := &http.Client{Transport: tr, Timeout: 10 * time.Second}
	tick := time.NewTicker(max(p.Every/time.Duration(len(p.Ports)), time.Millisecond))
	defer tick.Stop()
	for i := 0; ; i = (i + 1) % len(p.Ports) {
		select {
		case <-tick.C:
		case <-stop:
			tr.CloseIdleConnections()
			return nil
		}
		go func(port int) {
			resp, err := c.Get(fmt.Sprintf("https://127.0.0.1:%d/metrics/resource", port))
			if err != nil {
				log.Print(err)
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}(p.Ports[i])
	}
}

// report is one line of the process's own memory figures.
func (e *endpoints) report() string {
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return fmt.Sprintf("%s served %d (%d over HTTP/2) refused %d goroutines %d heap in use %.1f MB (GC goal %.1f MB) stacks %.1f MB %s",
		time.Now().Format("15:04:05"), e.served.Load(), e.overHTTP2.Load(), e.refused.Load(), runtime.NumGoroutine(),
		float64(m.HeapInuse)/1e6, float64(m.NextGC)/1e6, float64(m.StackInuse)/1e6, rss())
}

// rss is the process's resident set from /proc, whole and of files (the
// binary's pages).
func rss() string {
	f, err := os.Open("/proc/self/status")
	if err != nil {
		return ""
	}
	defer f.Close()
	var out []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if k, v, ok := strings.Cut(sc.Text(), ":"); ok && (k == "VmRSS" || k == "RssFile") {
			out = append(out, k+" "+strings.Join(strings.Fields(v), " "))
		}
	}
	return strings.Join(out, ", ")
}
