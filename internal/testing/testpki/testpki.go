// Package testpki issues the certificates that tests and test fixtures
// need: a certificate authority and the leaf certificates it signs, each
// with a P-256 key, in memory.
//
// It uses the standard library only, so that hack/bench/endpointfloor, which
// measures what a bare Go process pays for its endpoints, can link it
// without growing the floor it measures.
package testpki

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"net"
	"time"
)

// Pair is a certificate and its private key.
type Pair struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// Authority is a certificate authority: its own certificate and key, and
// how long the certificates it issues are valid.
type Authority struct {
	Pair
	validity time.Duration
}

// Leaf says what an issued certificate names and is for.
type Leaf struct {
	CommonName string
	// Organization becomes the groups of a Kubernetes client identity.
	Organization []string
	IPs          []net.IP
	DNSNames     []string
	// Server and Client set the extended key usages: serving TLS, and
	// authenticating to a TLS server.
	Server, Client bool
}

// NewAuthority makes a self-signed authority named commonName. Its
// certificate, and each it issues, is valid from a minute ago (a little
// clock skew between processes) for validity.
func NewAuthority(commonName string, validity time.Duration) (*Authority, error) {
	tmpl := &x509.Certificate{
		Subject:               pkix.Name{CommonName: commonName},
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	self, err := create(tmpl, nil, validity)
	if err != nil {
		return nil, err
	}
	return &Authority{Pair: self, validity: validity}, nil
}

// Issue makes a key and a certificate for leaf, signed by a.
func (a *Authority) Issue(leaf Leaf) (Pair, error) {
	tmpl := &x509.Certificate{
		Subject:     pkix.Name{CommonName: leaf.CommonName, Organization: leaf.Organization},
		KeyUsage:    x509.KeyUsageDigitalSignature,
		IPAddresses: leaf.IPs,
		DNSNames:    leaf.DNSNames,
	}
	if leaf.Server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if leaf.Client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	return create(tmpl, &a.Pair, a.validity)
}

// Pool is a certificate pool holding only a's certificate, to trust as
// roots or client CAs.
func (a *Authority) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(a.Cert)
	return p
}

// create makes a key and a certificate of tmpl for it, signed by parent, or
// by itself when parent is nil.
func create(tmpl *x509.Certificate, parent *Pair, validity time.Duration) (Pair, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return Pair{}, err
	}
	// Random serials: certificates of two runs must not look alike to a
	// client that caches by issuer and serial.
	tmpl.SerialNumber, err = rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return Pair{}, err
	}
	now := time.Now()
	tmpl.NotBefore, tmpl.NotAfter = now.Add(-time.Minute), now.Add(validity)
	signer := &Pair{Cert: tmpl, Key: key}
	if parent != nil {
		signer = parent
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, signer.Cert, &key.PublicKey, signer.Key)
	if err != nil {
		return Pair{}, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return Pair{}, err
	}
	return Pair{Cert: c, Key: key}, nil
}

// TLS is p as crypto/tls serves or presents it.
func (p Pair) TLS() tls.Certificate {
	return tls.Certificate{Certificate: [][]byte{p.Cert.Raw}, PrivateKey: p.Key, Leaf: p.Cert}
}

// CertPEM is p's certificate in PEM.
func (p Pair) CertPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: p.Cert.Raw})
}

// KeyDER is p's key in PKCS #8 DER.
func (p Pair) KeyDER() ([]byte, error) {
	return x509.MarshalPKCS8PrivateKey(p.Key)
}

// KeyPEM is p's key in PKCS #8 PEM, which Go's crypto/tls and the
// Kubernetes components read.
func (p Pair) KeyPEM() ([]byte, error) {
	der, err := p.KeyDER()
	if err != nil {
		return nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}
