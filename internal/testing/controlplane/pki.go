package controlplane

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"time"

	"k8s.io/client-go/util/keyutil"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testpki"
)

// certValidity is long enough for a cluster kept around for days of work.
const certValidity = 365 * 24 * time.Hour

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
var clientIdentities = map[string]testpki.Leaf{
	"admin":                   {CommonName: "kubernetes-admin", Organization: []string{"system:masters"}, Client: true},
	"kube-controller-manager": {CommonName: "system:kube-controller-manager", Client: true},
	"kube-scheduler":          {CommonName: "system:kube-scheduler", Client: true},
	// The apiserver presents this to kubelets (and so to our daemon) when it
	// proxies logs, exec and stats.
	"apiserver-kubelet-client": {CommonName: "kube-apiserver-kubelet-client", Organization: []string{"system:masters"}, Client: true},
	// metrics-server's identity, towards the apiserver and the kubelets
	// (our daemons) it scrapes.
	"metrics-server": {CommonName: MetricsServerUser, Client: true},
}

// metricsServerServing is metrics-server's serving certificate.
const metricsServerServing = "metrics-server-serving"

// frontProxyClient is the apiserver's identity towards aggregated APIs
// (metrics-server), signed by the front-proxy CA.
const frontProxyClient = "front-proxy-client"

// servingIdentities are the serving certificates of the cluster's servers
// other than the apiserver, by file name.
var servingIdentities = map[string]testpki.Leaf{
	// The aggregator reaches metrics-server by its Service's name.
	metricsServerServing: {CommonName: "metrics-server", DNSNames: []string{"metrics-server.kube-system.svc"}, Server: true},
}

// generate writes a fresh cluster CA and front-proxy CA, the apiserver's
// serving cert (valid for every address it is reached on), the other
// serving and client certs, and the service-account key pair. The cluster
// CA serves as client CA, serving CA and CSR signer: the control plane is a
// test fixture. The front-proxy CA signs only the apiserver's identity
// towards aggregated APIs, as kubeadm does: a certificate of the cluster CA
// must not be able to pass for the front proxy and claim any user in
// headers.
func (p pki) generate(servingIPs []net.IP) error {
	if err := os.MkdirAll(p.dir, 0o700); err != nil {
		return err
	}
	ca, err := testpki.NewAuthority("virtual-kubelet-test-ca", certValidity)
	if err != nil {
		return fmt.Errorf("generating CA: %w", err)
	}
	caKeyPEM, err := ca.KeyPEM()
	if err != nil {
		return err
	}
	frontProxyCA, err := testpki.NewAuthority("virtual-kubelet-test-front-proxy-ca", certValidity)
	if err != nil {
		return fmt.Errorf("generating front-proxy CA: %w", err)
	}
	// The front-proxy CA's key signs one certificate, now: it is not kept.
	if err := writeFiles(map[string][]byte{p.caCert(): ca.CertPEM(), p.caKey(): caKeyPEM, p.frontProxyCACert(): frontProxyCA.CertPEM()}); err != nil {
		return err
	}

	specs := map[string]testpki.Leaf{
		"apiserver": {
			CommonName: "kube-apiserver",
			IPs:        servingIPs,
			DNSNames: []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc",
				"kubernetes.default.svc.cluster.local"},
			Server: true,
		},
	}
	for _, m := range []map[string]testpki.Leaf{clientIdentities, servingIdentities} {
		for name, spec := range m {
			specs[name] = spec
		}
	}
	specs[frontProxyClient] = testpki.Leaf{CommonName: frontProxyClient, Client: true}
	for name, spec := range specs {
		signer := ca
		if name == frontProxyClient {
			signer = frontProxyCA
		}
		leaf, err := signer.Issue(spec)
		if err != nil {
			return fmt.Errorf("signing %s certificate: %w", name, err)
		}
		keyPEM, err := leaf.KeyPEM()
		if err != nil {
			return err
		}
		if err := writeFiles(map[string][]byte{p.leafCert(name): leaf.CertPEM(), p.leafKey(name): keyPEM}); err != nil {
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
