package api

import (
	"crypto/tls"
	"crypto/x509"
	"net/http"
	"slices"
	"testing"
	"time"

	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	clocktesting "k8s.io/utils/clock/testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testpki"
)

// clientCA is a client CA bundle that a test reloads, as a client CA file is.
type clientCA struct {
	opts x509.VerifyOptions
}

func newClientCA(cas ...*testpki.Authority) *clientCA {
	b := &clientCA{}
	b.reload(cas...)
	return b
}

// reload replaces the bundle, with a new pool as the apiserver's CA file
// content does.
func (b *clientCA) reload(cas ...*testpki.Authority) {
	pool := x509.NewCertPool()
	for _, ca := range cas {
		pool.AddCert(ca.Cert)
	}
	b.opts = x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}
}

func (b *clientCA) verifyOptions() (x509.VerifyOptions, bool) { return b.opts, true }

func authority(t testing.TB, validity time.Duration) *testpki.Authority {
	t.Helper()
	ca, err := testpki.NewAuthority("client-ca", validity)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func clientRequest(t testing.TB, ca *testpki.Authority, cn string, groups ...string) *http.Request {
	t.Helper()
	p, err := ca.Issue(testpki.Leaf{CommonName: cn, Organization: groups, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	return &http.Request{TLS: &tls.ConnectionState{PeerCertificates: []*x509.Certificate{p.Cert}}}
}

// authenticatesAs checks that r authenticates as name in exactly groups.
func authenticatesAs(t *testing.T, v *verifiedClientCerts, r *http.Request, name string, groups ...string) {
	t.Helper()
	resp, ok, err := v.AuthenticateRequest(r)
	if err != nil || !ok {
		t.Fatalf("not authenticated: ok %v, error %v", ok, err)
	}
	if got := resp.User.GetName(); got != name || !slices.Equal(resp.User.GetGroups(), groups) {
		t.Fatalf("authenticated as %q in %q, want %q in %q", got, resp.User.GetGroups(), name, groups)
	}
}

func refused(t *testing.T, v *verifiedClientCerts, r *http.Request) {
	t.Helper()
	if resp, ok, err := v.AuthenticateRequest(r); err == nil || ok {
		t.Fatalf("authenticated (%+v, ok %v, error %v), want a verification error", resp, ok, err)
	}
}

func TestVerifiedClientCertsRemembersVerifiedChain(t *testing.T) {
	ca := authority(t, time.Hour)
	bundle := newClientCA(ca)
	v := newVerifiedClientCerts(bundle.verifyOptions, time.Minute, clocktesting.NewFakeClock(time.Now()))
	r := clientRequest(t, ca, "metrics-server", "scrapers")
	authenticatesAs(t, v, r, "metrics-server", "scrapers")

	// Options under which the chain no longer verifies, with the same CA
	// bundle: only a remembered verification still authenticates.
	bundle.opts.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}
	authenticatesAs(t, v, r, "metrics-server", "scrapers")
}

func TestVerifiedClientCertsForgetAfterTTL(t *testing.T) {
	ca := authority(t, time.Hour)
	bundle := newClientCA(ca)
	clock := clocktesting.NewFakeClock(time.Now())
	v := newVerifiedClientCerts(bundle.verifyOptions, time.Minute, clock)
	r := clientRequest(t, ca, "metrics-server")
	authenticatesAs(t, v, r, "metrics-server")
	bundle.opts.KeyUsages = []x509.ExtKeyUsage{x509.ExtKeyUsageCodeSigning}
	clock.Step(time.Minute + time.Second)
	refused(t, v, r)
}

// A client CA taken out of the bundle is refused at once, though its
// certificates were verified a moment before.
func TestVerifiedClientCertsRefuseRemovedCA(t *testing.T) {
	old, current := authority(t, time.Hour), authority(t, time.Hour)
	bundle := newClientCA(old, current)
	v := newVerifiedClientCerts(bundle.verifyOptions, time.Hour, clocktesting.NewFakeClock(time.Now()))
	fromOld := clientRequest(t, old, "admin", "system:masters")
	fromCurrent := clientRequest(t, current, "metrics-server")
	authenticatesAs(t, v, fromOld, "admin", "system:masters")
	authenticatesAs(t, v, fromCurrent, "metrics-server")

	bundle.reload(current)
	refused(t, v, fromOld)
	authenticatesAs(t, v, fromCurrent, "metrics-server")
}

// A remembered chain is not used past the earliest expiry in it, however
// long the cache lifetime.
func TestVerifiedClientCertsRefuseExpired(t *testing.T) {
	ca := authority(t, time.Hour)
	bundle := newClientCA(ca)
	clock := clocktesting.NewFakeClock(time.Now())
	v := newVerifiedClientCerts(bundle.verifyOptions, 24*time.Hour, clock)
	r := clientRequest(t, ca, "metrics-server")
	authenticatesAs(t, v, r, "metrics-server")
	clock.Step(2 * time.Hour)
	refused(t, v, r)
}

// Certificates are told apart by their bytes: two of the same name with
// different groups, or a stranger's, get nothing from each other.
func TestVerifiedClientCertsKeyedByChain(t *testing.T) {
	ca := authority(t, time.Hour)
	bundle := newClientCA(ca)
	v := newVerifiedClientCerts(bundle.verifyOptions, time.Hour, clocktesting.NewFakeClock(time.Now()))
	reader := clientRequest(t, ca, "alice", "readers")
	admin := clientRequest(t, ca, "alice", "system:masters")
	stranger := clientRequest(t, authority(t, time.Hour), "alice", "system:masters")
	for range 2 {
		authenticatesAs(t, v, reader, "alice", "readers")
		authenticatesAs(t, v, admin, "alice", "system:masters")
		refused(t, v, stranger)
	}
	if n := len(v.verified.Keys()); n != 2 {
		t.Errorf("%d chains remembered, want 2 (failures are not)", n)
	}
	if resp, ok, err := v.AuthenticateRequest(&http.Request{TLS: &tls.ConnectionState{}}); resp != nil || ok || err != nil {
		t.Errorf("no certificate: %+v, %v, %v; want no opinion", resp, ok, err)
	}
}

// BenchmarkClientCertAuthentication compares verifying the chain on every
// request, as the apiserver's x509 authenticator does, with remembering it.
func BenchmarkClientCertAuthentication(b *testing.B) {
	ca := authority(b, time.Hour)
	bundle := newClientCA(ca)
	r := clientRequest(b, ca, "metrics-server", "scrapers")
	run := func(b *testing.B, authenticate func(*http.Request) (bool, error)) {
		b.ReportAllocs()
		for b.Loop() {
			if ok, err := authenticate(r); !ok || err != nil {
				b.Fatalf("not authenticated: %v", err)
			}
		}
	}
	b.Run("verify every request", func(b *testing.B) {
		a := x509request.NewDynamic(bundle.verifyOptions, x509request.CommonNameUserConversion)
		run(b, func(r *http.Request) (bool, error) { _, ok, err := a.AuthenticateRequest(r); return ok, err })
	})
	b.Run("remembered", func(b *testing.B) {
		v := newVerifiedClientCerts(bundle.verifyOptions, time.Hour, clocktesting.NewFakeClock(time.Now()))
		run(b, func(r *http.Request) (bool, error) { _, ok, err := v.AuthenticateRequest(r); return ok, err })
	})
}
