package api

import (
	"crypto/x509"
	"encoding/binary"
	"net/http"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/cache"
	"k8s.io/apiserver/pkg/authentication/authenticator"
	x509request "k8s.io/apiserver/pkg/authentication/request/x509"
	"k8s.io/apiserver/pkg/authentication/user"
)

// maxVerifiedChains bounds the verified certificate chains remembered. Only
// chains that verified are kept, so a client cannot fill it with strangers'
// certificates; a fleet's clients present a handful.
const maxVerifiedChains = 1024

// verifiedClientCerts authenticates a request by its client certificate as
// the apiserver's x509 authenticator does (CN the user, O the groups), and
// remembers for ttl each certificate chain it verified, keyed by the chain's
// bytes. The apiserver verifies the chain again on every request; a daemon
// serving many nodes' kubelet APIs to the same clients (metrics-server
// scraping each node, the API server proxying logs and exec) would verify
// the same certificate once per node per scrape: with 1,000 idle nodes the
// signature checks were a quarter of its CPU. A remembered chain is used only
// while the CA bundle is the one it was verified against (a reloaded client
// CA file starts over) and never past the earliest expiry in its verified
// chain. Failures are not remembered.
type verifiedClientCerts struct {
	verifyOptions x509request.VerifyOptionFunc
	verify        *x509request.Authenticator
	ttl           time.Duration
	clock         cache.Clock
	verified      *cache.LRUExpireCache
}

// verifiedChain is a remembered verification: the CA bundle it was made
// against, and whom the chain authenticated.
type verifiedChain struct {
	roots *x509.CertPool
	resp  authenticator.Response
}

// chainUser is the user a verified chain names, with the chain's earliest
// expiry, carried out of the x509 authenticator's user conversion.
type chainUser struct {
	user.Info
	notAfter time.Time
}

// newVerifiedClientCerts verifies client certificates against the CA
// bundle verifyOptions gives, at clock's time, remembering each verified
// chain for ttl.
func newVerifiedClientCerts(verifyOptions x509request.VerifyOptionFunc, ttl time.Duration, clock cache.Clock) *verifiedClientCerts {
	atClock := func() (x509.VerifyOptions, bool) {
		opts, ok := verifyOptions()
		opts.CurrentTime = clock.Now()
		return opts, ok
	}
	return &verifiedClientCerts{
		verifyOptions: atClock,
		verify:        x509request.NewDynamic(atClock, x509request.UserConversionFunc(userOfChain)),
		ttl:           ttl,
		clock:         clock,
		verified:      cache.NewLRUExpireCacheWithClock(maxVerifiedChains, clock),
	}
}

// userOfChain is the apiserver's CommonNameUserConversion, noting when the
// chain it was given expires.
func userOfChain(chain []*x509.Certificate) (*authenticator.Response, bool, error) {
	resp, ok, err := x509request.CommonNameUserConversion.User(chain)
	if !ok || err != nil {
		return resp, ok, err
	}
	notAfter := chain[0].NotAfter
	for _, c := range chain[1:] {
		if c.NotAfter.Before(notAfter) {
			notAfter = c.NotAfter
		}
	}
	return &authenticator.Response{Audiences: resp.Audiences, User: chainUser{Info: resp.User, notAfter: notAfter}}, true, nil
}

// AuthenticateRequest implements authenticator.Request.
func (v *verifiedClientCerts) AuthenticateRequest(req *http.Request) (*authenticator.Response, bool, error) {
	if req.TLS == nil || len(req.TLS.PeerCertificates) == 0 {
		return nil, false, nil
	}
	opts, ok := v.verifyOptions()
	if !ok {
		return nil, false, nil
	}
	key := chainKey(req.TLS.PeerCertificates)
	if got, ok := v.verified.Get(key); ok {
		if c := got.(verifiedChain); c.roots == opts.Roots {
			resp := c.resp
			return &resp, true, nil
		}
	}
	resp, ok, err := v.verify.AuthenticateRequest(req)
	if !ok || err != nil {
		return resp, ok, err
	}
	u, isChainUser := resp.User.(chainUser)
	if !isChainUser {
		return resp, ok, err
	}
	resp = &authenticator.Response{Audiences: resp.Audiences, User: u.Info}
	if ttl := min(v.ttl, u.notAfter.Sub(v.clock.Now())); ttl > 0 {
		v.verified.Add(key, verifiedChain{roots: opts.Roots, resp: *resp}, ttl)
	}
	return resp, true, nil
}

// chainKey identifies the certificates a client presented: the leaf and
// the intermediates it is verified with, each prefixed by its length.
func chainKey(certs []*x509.Certificate) string {
	n := 0
	for _, c := range certs {
		n += 4 + len(c.Raw)
	}
	var b strings.Builder
	b.Grow(n)
	for _, c := range certs {
		var size [4]byte
		binary.BigEndian.PutUint32(size[:], uint32(len(c.Raw)))
		b.Write(size[:])
		b.Write(c.Raw)
	}
	return b.String()
}
