package grpcplugin

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"
)

// Config is the --provider-config file of --provider grpc (YAML).
type Config struct {
	// Endpoint is where the plugin listens: unix:///path/to.sock, or
	// host:port (TLS required then, see TLS).
	Endpoint string `json:"endpoint"`
	// TLS is the client's side of mutual TLS to a host:port endpoint.
	TLS *TLSConfig `json:"tls,omitempty"`
	// CallTimeout bounds each unary call (10s if not set).
	CallTimeout metav1.Duration `json:"callTimeout,omitempty"`
	// ConnectTimeout is how long the daemon waits at its start for the
	// plugin to answer the handshake (60s if not set).
	ConnectTimeout metav1.Duration `json:"connectTimeout,omitempty"`
	// Insecure allows a host:port endpoint without TLS (tests, loopback).
	Insecure bool `json:"insecure,omitempty"`
}

// TLSConfig names the PEM files of mutual TLS.
type TLSConfig struct {
	// CAFile verifies the plugin's certificate.
	CAFile string `json:"caFile"`
	// CertFile and KeyFile are the daemon's client certificate.
	CertFile string `json:"certFile"`
	KeyFile  string `json:"keyFile"`
	// ServerName is the name in the plugin's certificate, if not the
	// endpoint's host.
	ServerName string `json:"serverName,omitempty"`
}

const (
	defaultCallTimeout    = 10 * time.Second
	defaultConnectTimeout = 60 * time.Second
)

// validate fills the defaults and checks the fields, naming the one that
// is wrong.
func (c *Config) validate() error {
	switch {
	case c.Endpoint == "":
		return errors.New("endpoint: required, unix:///path/to.sock or host:port")
	case strings.HasPrefix(c.Endpoint, "unix://"):
		if !strings.HasPrefix(c.Endpoint, "unix:///") {
			return fmt.Errorf("endpoint %q: a unix socket needs an absolute path, unix:///path/to.sock", c.Endpoint)
		}
		if c.TLS != nil {
			return errors.New("tls: not used with a unix socket endpoint")
		}
	case strings.Contains(c.Endpoint, "://"):
		return fmt.Errorf("endpoint %q: unix:///path/to.sock or host:port", c.Endpoint)
	case c.TLS == nil && !c.Insecure:
		return fmt.Errorf("endpoint %q: a host:port endpoint needs tls (caFile, certFile, keyFile), or insecure: true", c.Endpoint)
	}
	if c.TLS != nil {
		if c.TLS.CAFile == "" || c.TLS.CertFile == "" || c.TLS.KeyFile == "" {
			return errors.New("tls: caFile, certFile and keyFile are all required")
		}
	}
	if c.CallTimeout.Duration < 0 || c.ConnectTimeout.Duration < 0 {
		return errors.New("callTimeout and connectTimeout must not be negative")
	}
	if c.CallTimeout.Duration == 0 {
		c.CallTimeout.Duration = defaultCallTimeout
	}
	if c.ConnectTimeout.Duration == 0 {
		c.ConnectTimeout.Duration = defaultConnectTimeout
	}
	return nil
}

// credentials are the transport credentials of the endpoint.
func (c *Config) credentials() (grpc.DialOption, error) {
	if c.TLS == nil {
		return grpc.WithTransportCredentials(insecure.NewCredentials()), nil
	}
	ca, err := os.ReadFile(c.TLS.CAFile)
	if err != nil {
		return nil, fmt.Errorf("tls.caFile: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("tls.caFile %s: no PEM certificate in it", c.TLS.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(c.TLS.CertFile, c.TLS.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("tls.certFile/keyFile: %w", err)
	}
	return grpc.WithTransportCredentials(credentials.NewTLS(&tls.Config{
		RootCAs: pool, Certificates: []tls.Certificate{cert}, ServerName: c.TLS.ServerName, MinVersion: tls.VersionTLS12,
	})), nil
}
