package nodeutil

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
)

// DefaultServerCiphers are the TLS 1.2 cipher suites the kubelet API
// offers: ECDHE key exchange with AEAD ciphers only. TLS 1.3 suites are not
// configurable and always on.
func DefaultServerCiphers() []uint16 {
	return []uint16{
		tls.TLS_ECDHE_ECDSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_RSA_WITH_AES_128_GCM_SHA256,
		tls.TLS_ECDHE_ECDSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_RSA_WITH_AES_256_GCM_SHA384,
		tls.TLS_ECDHE_ECDSA_WITH_CHACHA20_POLY1305_SHA256,
		tls.TLS_ECDHE_RSA_WITH_CHACHA20_POLY1305_SHA256,
	}
}

// WithCACert adds the PEM certificates to the CAs client certificates are
// verified against, and asks clients for a certificate.
func WithCACert(pem []byte) func(*tls.Config) error {
	return func(c *tls.Config) error {
		if c.ClientCAs == nil {
			c.ClientCAs = x509.NewCertPool()
		}
		if !c.ClientCAs.AppendCertsFromPEM(pem) {
			return errors.New("client CA: no PEM certificate found")
		}
		if c.ClientAuth < tls.VerifyClientCertIfGiven {
			c.ClientAuth = tls.VerifyClientCertIfGiven
		}
		return nil
	}
}

// WithCAFromPath is WithCACert with the PEM file at p.
func WithCAFromPath(p string) func(*tls.Config) error {
	return func(c *tls.Config) error {
		pem, err := os.ReadFile(p)
		if err != nil {
			return fmt.Errorf("client CA: %w", err)
		}
		if err := WithCACert(pem)(c); err != nil {
			return fmt.Errorf("%s: %w", p, err)
		}
		return nil
	}
}

// WithKeyPairFromPath adds the serving certificate and key of the PEM files
// cert and key.
func WithKeyPairFromPath(cert, key string) func(*tls.Config) error {
	return func(c *tls.Config) error {
		pair, err := tls.LoadX509KeyPair(cert, key)
		if err != nil {
			return fmt.Errorf("serving certificate %s, key %s: %w", cert, key, err)
		}
		c.Certificates = append(c.Certificates, pair)
		return nil
	}
}
