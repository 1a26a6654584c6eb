package commands

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"slices"
	"strconv"
	"sync"
	"time"

	certificatesv1 "k8s.io/api/certificates/v1"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/authorization/authorizerfactory"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/certificate"

	"github.com/vkubelet/virtual-kubelet/internal/metrics"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// servers are the daemon's HTTP servers: the kubelet API and metrics.
type servers struct {
	// mu guards list and stops: with --leader-elect, nodes start and stop
	// their kubelet APIs as they move between replicas.
	mu   sync.Mutex
	list []*http.Server
	// stops run after the servers are shut down.
	stops []func()
	// errs receives the error of a server that stopped on its own.
	errs chan error

	opts *ServerOptions
	// nodes are the process's nodes, named in the self-signed certificate
	// and the certificate files.
	nodes  *NodeOptions
	client kubernetes.Interface
	// auth authenticates and authorizes the requests of every node's
	// kubelet API; each node maps requests to its own name. authz is
	// the authorizer of --authorization-mode.
	auth  api.Auth
	authz authorizer.Authorizer
	// router, with --kubelet-listener shared, is the one listener's, set
	// by startServers: nodes join and leave it.
	router *api.NodeRouter
	// selfSigned is the serving certificate of every node when none is
	// given, made once, under certMu (nodes of replicas start at any time).
	certMu     sync.Mutex
	selfSigned *tls.Certificate
}

func (s *servers) serve(ctx context.Context, name string, srv *http.Server, l net.Listener, tlsOn bool) {
	trackSessions(srv)
	s.mu.Lock()
	s.list = append(s.list, srv)
	s.mu.Unlock()
	log.G(ctx).WithField("address", l.Addr().String()).Infof("serving %s", name)
	go func() {
		var err error
		if tlsOn {
			err = srv.ServeTLS(l, "", "")
		} else {
			err = srv.Serve(l)
		}
		if !errors.Is(err, http.ErrServerClosed) {
			s.errs <- fmt.Errorf("%s: %w: %v", name, errServerFailed, err)
		}
	}()
}

// shutdown stops the servers, letting requests finish for up to timeout.
// Long-running streams (exec, follow) are told to end and get until the
// deadline to send their last words; what is left is cut then. The servers
// stop together under that one deadline: a thousand nodes, each with a
// metrics-server connection to drain, must stop within a pod's grace period.
func (s *servers) shutdown(timeout time.Duration) {
	s.mu.Lock()
	list, stops := s.list, s.stops
	s.list, s.stops = nil, nil
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	var wg sync.WaitGroup
	for _, srv := range list {
		wg.Go(func() { shutdownServer(ctx, srv) })
	}
	wg.Wait()
	for _, stop := range stops {
		stop()
	}
}

// shutdownServer stops srv, letting requests finish until ctx ends. Its
// streaming sessions are told to end (see trackSessions) and waited for
// as long: each sends its client a final status and closes cleanly,
// instead of being cut when the process exits.
func shutdownServer(ctx context.Context, srv *http.Server) {
	if err := srv.Shutdown(ctx); err != nil {
		_ = srv.Close()
	}
	if t, ok := srv.Handler.(*sessionTracker); ok {
		t.wait(ctx)
	}
}

// startServers starts the metrics server and prepares what every node's
// kubelet API server shares: the client, and one authenticator and
// authorizer with their caches.
//
// With podNode, one listener serves every node's kubelet API (see
// serveShared), its serving certificate for nodeIP.
func startServers(ctx context.Context, o *ServerOptions, nodes *NodeOptions, client kubernetes.Interface, restCfg *rest.Config, nodeIP string, podNode api.PodNodeFunc) (*servers, error) {
	s := &servers{errs: make(chan error, 2), opts: o, nodes: nodes, client: client}
	clientCA, err := defaultClientCA(ctx, o, restCfg)
	if err != nil {
		return nil, err
	}
	if s.auth, err = api.NewAuth(ctx, api.AuthConfig{
		ClientCAFile:              o.ClientCAFile,
		ClientCA:                  clientCA,
		Anonymous:                 o.AnonymousAuth,
		TokenReviewClient:         client.AuthenticationV1(),
		SubjectAccessReviewClient: client.AuthorizationV1(),
		NodeName:                  nodes.NodeName,
	}); err != nil {
		return nil, err
	}
	s.authz = s.auth
	if o.AuthorizationMode == AuthzAlwaysAllow {
		s.authz = authorizerfactory.NewAlwaysAllowAuthorizer()
	}
	if podNode != nil {
		if err := s.serveShared(ctx, nodeIP, podNode); err != nil {
			return nil, err
		}
	}

	if o.MetricsAddr != "" {
		ml, err := listen("metrics-addr", o.MetricsAddr)
		if err != nil {
			return nil, err
		}
		mux := http.NewServeMux()
		mux.Handle("GET /metrics", metrics.Handler())
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) { _, _ = w.Write([]byte("ok")) })
		if o.EnableProfiling {
			servePprof(mux)
		}
		s.serve(ctx, "metrics", &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}, ml, false)
	}
	return s, nil
}

// servePprof adds Go's /debug/pprof handlers to mux.
func servePprof(mux *http.ServeMux) {
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
}

// kubeletAPI serves node name's kubelet API on port, or with the shared
// listener joins it: the provider's capabilities caps, behind the kubelet's
// authentication and authorization. It runs until shutdown, or until the
// returned func stops it (a node moving to another replica), which with
// the shared listener takes the node off it.
func (s *servers) kubeletAPI(ctx context.Context, name string, port int32, nodeIP string, caps node.Capabilities) (stop func(), err error) {
	o := s.opts
	routes := caps.PodHandlerConfig()
	routes.StreamIdleTimeout, routes.StreamCreationTimeout = o.StreamIdleTimeout, o.StreamCreationTimeout
	if s.router != nil {
		return s.router.Register(name, api.PodHandler(routes, true))
	}
	tlsConfig, stopTLS, err := s.servingTLS(ctx, name, []string{name}, nodeIP)
	if err != nil {
		return nil, err
	}
	stopTLS = sync.OnceFunc(stopTLS)
	s.mu.Lock()
	s.stops = append(s.stops, stopTLS)
	s.mu.Unlock()
	l, err := listen("listen-port", net.JoinHostPort(o.ListenAddress, strconv.Itoa(int(port))))
	if err != nil {
		stopTLS()
		return nil, err
	}
	handler := api.WithAuth(api.PodHandler(routes, true), api.NewAuthFrom(s.auth, s.authz, name))
	srv := &http.Server{
		Handler:           handler,
		TLSConfig:         tlsConfig,
		ReadHeaderTimeout: 30 * time.Second,
	}
	s.serve(ctx, "kubelet API", srv, l, true)
	return func() {
		s.mu.Lock()
		s.list = slices.DeleteFunc(s.list, func(other *http.Server) bool { return other == srv })
		s.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
		defer cancel()
		shutdownServer(ctx, srv)
		stopTLS()
	}, nil
}

// defaultClientCA is the CA client certificates are verified against when
// --client-ca-file is not given: the cluster CA of the kubeconfig (or the
// in-cluster config), which signs the API server's kubelet client
// certificate in most clusters.
func defaultClientCA(ctx context.Context, o *ServerOptions, restCfg *rest.Config) ([]byte, error) {
	if o.ClientCAFile != "" {
		return nil, nil
	}
	ca := restCfg.CAData
	if len(ca) == 0 && restCfg.CAFile != "" {
		var err error
		if ca, err = os.ReadFile(restCfg.CAFile); err != nil {
			return nil, fmt.Errorf("reading the kubeconfig's CA for client certificates: %w", err)
		}
	}
	if len(ca) == 0 {
		log.G(ctx).Warn("no --client-ca-file and no CA in the kubeconfig: client certificates (the API server's) are not accepted")
		return nil, nil
	}
	log.G(ctx).Info("verifying client certificates against the kubeconfig's CA; set --client-ca-file to use another")
	return ca, nil
}

// servingTLS is the TLS configuration of the kubelet API of node name (or
// of the shared listener, named --nodename): a certificate from the
// certificates API (--rotate-server-certificates) for dnsNames and the
// address, the given one, or a self-signed one for every node's name and
// the address. Client certificates are requested, and verified by the
// authenticator against --client-ca-file. The returned function stops
// certificate rotation.
func (s *servers) servingTLS(ctx context.Context, name string, dnsNames []string, nodeIP string) (*tls.Config, func(), error) {
	o := s.opts
	cfg := &tls.Config{MinVersion: tls.VersionTLS12, ClientAuth: tls.RequestClientCert}
	switch {
	case o.RotateServerCerts:
		m, err := s.servingCertManager(name, dnsNames, nodeIP)
		if err != nil {
			return nil, nil, err
		}
		m.Start()
		log.G(ctx).Infof("requested a serving certificate (signer %s); approve its CertificateSigningRequest, e.g. "+
			"kubectl certificate approve $(kubectl get csr --field-selector spec.signerName=%s -o name)",
			certificatesv1.KubeletServingSignerName, certificatesv1.KubeletServingSignerName)
		cfg.GetCertificate = func(*tls.ClientHelloInfo) (*tls.Certificate, error) {
			if c := m.Current(); c != nil {
				return c, nil
			}
			return nil, errors.New("no serving certificate yet: its CertificateSigningRequest awaits approval")
		}
		return cfg, m.Stop, nil
	case o.TLSCertFile != "":
		pair, err := tls.LoadX509KeyPair(o.TLSCertFile, o.TLSKeyFile)
		if err != nil {
			return nil, nil, fmt.Errorf("--tls-cert-file/--tls-private-key-file: %w", err)
		}
		cfg.Certificates = []tls.Certificate{pair}
	default:
		// One key pair for every node of the process, with every node's
		// name: a thousand RSA keys would take minutes to make.
		s.certMu.Lock()
		defer s.certMu.Unlock()
		if s.selfSigned == nil {
			names := s.nodes.NodeNames()
			certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(names[0], []net.IP{net.ParseIP(nodeIP)}, names)
			if err != nil {
				return nil, nil, err
			}
			pair, err := tls.X509KeyPair(certPEM, keyPEM)
			if err != nil {
				return nil, nil, err
			}
			s.selfSigned = &pair
			log.G(ctx).Warn("serving the kubelet API with a self-signed certificate: API servers that verify kubelet certificates " +
				"(--kubelet-certificate-authority) will refuse it; pass --tls-cert-file and --tls-private-key-file, or --rotate-server-certificates")
		}
		cfg.Certificates = []tls.Certificate{*s.selfSigned}
	}
	return cfg, func() {}, nil
}

// servingCertManager requests the kubelet serving certificate the way the
// kubelet does (subject system:node:<name> in system:nodes, the node's
// names and IP as SANs), keeps it in --cert-dir and renews it before it
// expires.
func (s *servers) servingCertManager(name string, dnsNames []string, nodeIP string) (certificate.Manager, error) {
	pair := "kubelet-server" // the kubelet's name, for a single node
	if name != s.nodes.NodeName {
		pair += "-" + name
	}
	store, err := certificate.NewFileStore(pair, s.opts.CertDir, s.opts.CertDir, "", "")
	if err != nil {
		return nil, fmt.Errorf("--cert-dir %s: %w", s.opts.CertDir, err)
	}
	template := &x509.CertificateRequest{
		Subject:     pkix.Name{CommonName: "system:node:" + name, Organization: []string{"system:nodes"}},
		DNSNames:    dnsNames,
		IPAddresses: []net.IP{net.ParseIP(nodeIP)},
	}
	return certificate.NewManager(&certificate.Config{
		Name:             "kubelet-serving",
		ClientsetFn:      func(*tls.Certificate) (kubernetes.Interface, error) { return s.client, nil },
		Template:         template,
		SignerName:       certificatesv1.KubeletServingSignerName,
		Usages:           []certificatesv1.KeyUsage{certificatesv1.UsageDigitalSignature, certificatesv1.UsageServerAuth},
		CertificateStore: store,
	})
}

// errServerFailed wraps a server that stopped on its own.
var errServerFailed = errors.New("server failed")

// listen opens a TCP listener, with a message naming the flag on failure.
func listen(flag, addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("--%s %s: %w", flag, addr, err)
	}
	return l, nil
}
