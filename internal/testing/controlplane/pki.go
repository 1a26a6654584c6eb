package controlplane

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/keyutil"
)

// certValidity is long enough for a cluster kept around for days of work.
const certValidity = 365 * 24 * time.Hour

// authority is a CA that signs the cluster's certificates. The cluster CA
// serves as client CA, serving CA and CSR signer: the control plane is a test
// fixture. The front-proxy CA signs only the apiserver's identity towards
// aggregated APIs, as kubeadm does: a certificate of the cluster CA must not
// be able to pass for the front proxy and claim any user in headers.
type authority struct {
	cert *x509.Certificate
	key  crypto.Signer
}

func newAuthority(name string) (*authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	c, err := cert.NewSelfSignedCACert(cert.Config{CommonName: name}, key)
	if err != nil {
		return nil, err
	}
	return &authority{cert: c, key: key}, nil
}

// certSpec says what a leaf certificate is for.
type certSpec struct {
	commonName   string
	organization []string
	ips          []net.IP
	dnsNames     []string
	server       bool
	client       bool
}

// sign issues a leaf certificate and returns its PEM cert and key.
func (a *authority) sign(spec certSpec) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	serial, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 62))
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial,
		Subject:      pkix.Name{CommonName: spec.commonName, Organization: spec.organization},
		NotBefore:    now.Add(-time.Minute),
		NotAfter:     now.Add(certValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		IPAddresses:  spec.ips,
		DNSNames:     spec.dnsNames,
	}
	if spec.server {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	if spec.client {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageClientAuth)
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.cert, key.Public(), a.key)
	if err != nil {
		return nil, nil, err
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, nil, err
	}
	certPEM, err = cert.EncodeCertificates(c)
	if err != nil {
		return nil, nil, err
	}
	keyPEM, err = keyutil.MarshalPrivateKeyToPEM(key)
	return certPEM, keyPEM, err
}

// pki is the set of files the components are started with.
type pki struct {
	dir string
}

func (p pki) path(name string) string { return filepath.Join(p.dir, name) }

func (p pki) caCert() string           { return p.path("ca.crt") }
func (p pki) frontProxyCACert() string { return p.path("front-proxy-ca.crt") }
func (p pki) caKey() string            { return p.path("ca.key") }
func (p pki) saKey() string            { return p.path("sa.key") }
func (p pki) saPub() string            { return p.path("sa.pub") }
func (p pki) leafCert(n string) string { return p.path(n + ".crt") }
func (p pki) leafKey(n string) string  { return p.path(n + ".key") }

// client identities the control plane uses, by file name.
var clientIdentities = map[string]certSpec{
	"admin":                   {commonName: "kubernetes-admin", organization: []string{"system:masters"}, client: true},
	"kube-controller-manager": {commonName: "system:kube-controller-manager", client: true},
	"kube-scheduler":          {commonName: "system:kube-scheduler", client: true},
	// The apiserver presents this to kubelets (and so to our daemon) when it
	// proxies logs, exec and stats.
	"apiserver-kubelet-client": {commonName: "kube-apiserver-kubelet-client", organization: []string{"system:masters"}, client: true},
	// metrics-server's identity, towards the apiserver and the kubelets
	// (our daemons) it scrapes.
	"metrics-server": {commonName: MetricsServerUser, client: true},
}

// metricsServerServing is metrics-server's serving certificate.
const metricsServerServing = "metrics-server-serving"

// frontProxyClient is the apiserver's identity towards aggregated APIs
// (metrics-server), signed by the front-proxy CA.
const frontProxyClient = "front-proxy-client"

// servingIdentities are the serving certificates of the cluster's servers
// other than the apiserver, by file name.
var servingIdentities = map[string]certSpec{
	// The aggregator reaches metrics-server by its Service's name.
	metricsServerServing: {commonName: "metrics-server", dnsNames: []string{"metrics-server.kube-system.svc"}, server: true},
}

// generate writes a fresh cluster CA and front-proxy CA, the apiserver's
// serving cert (valid for every address it is reached on), the other
// serving and client certs, and the service-account key pair.
func (p pki) generate(servingIPs []net.IP) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	ca, err := newAuthority("virtual-kubelet-test-ca")
	if err != nil {
		return fmt.Errorf("generating CA: %w", err)
	}
	caPEM, err := cert.EncodeCertificates(ca.cert)
	if err != nil {
		return err
	}
	caKeyPEM, err := keyutil.MarshalPrivateKeyToPEM(ca.key)
	if err != nil {
		return err
	}
	frontProxyCA, err := newAuthority("virtual-kubelet-test-front-proxy-ca")
	if err != nil {
		return fmt.Errorf("generating front-proxy CA: %w", err)
	}
	frontProxyCAPEM, err := cert.EncodeCertificates(frontProxyCA.cert)
	if err != nil {
		return err
	}
	// The front-proxy CA's key signs one certificate, now: it is not kept.
	if err := writeFiles(map[string][]byte{p.caCert(): caPEM, p.caKey(): caKeyPEM, p.frontProxyCACert(): frontProxyCAPEM}); err != nil {
		return err
	}

	specs := map[string]certSpec{
		"apiserver": {
			commonName: "kube-apiserver",
			ips:        servingIPs,
			dnsNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			server: true,
		},
	}
	for _, m := range []map[string]certSpec{clientIdentities, servingIdentities} {
		for name, spec := range m {
			specs[name] = spec
		}
	}
	specs[frontProxyClient] = certSpec{commonName: frontProxyClient, client: true}
	for name, spec := range specs {
		signer := ca
		if name == frontProxyClient {
			signer = frontProxyCA
		}
		c, k, err := signer.sign(spec)
		if err != nil {
			return fmt.Errorf("signing %s certificate: %w", name, err)
		}
		if err := writeFiles(map[string][]byte{p.leafCert(name): c, p.leafKey(name): k}); err != nil {
			return err
		}
	}

	saKey, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return err
	}
	saKeyPEM, err := keyutil.MarshalPrivateKeyToPEM(saKey)
	if err != nil {
		return err
	}
	pubDER, err := x509.MarshalPKIXPublicKey(saKey.Public())
	if err != nil {
		return err
	}
	pubPEM := pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER})
	return writeFiles(map[string][]byte{p.saKey(): saKeyPEM, p.saPub(): pubPEM})
}

func writeFiles(files map[string][]byte) error {
	for path, data := range files {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}
