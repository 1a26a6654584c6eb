package commands

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"time"

	"github.com/spf13/cobra"
	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"

	"github.com/vkubelet/virtual-kubelet/plugin/providerserver"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// pluginOptions are the flags of `virtual-kubelet plugin`.
type pluginOptions struct {
	provider, config, listen, nodeName, os, clusterDomain string
	// pprofAddr serves Go's /debug/pprof, on a loopback address only.
	pprofAddr string
	// The plugin's side of mutual TLS, for a host:port listener.
	tlsCert, tlsKey, tlsClientCA string
	// insecure serves a host:port listener without TLS, on request only.
	insecure bool
	// socketMode is the permission of a unix socket listener, in octal.
	socketMode string
}

// newPluginCommand serves a built-in provider as a provider plugin, for a
// daemon started with --provider grpc.
func newPluginCommand() *cobra.Command {
	o := &pluginOptions{}
	cmd := &cobra.Command{
		Use:   "plugin --provider NAME --listen unix:///path/to.sock [flags]",
		Short: "Serve a built-in provider as a plugin for --provider grpc",
		Long: `plugin runs a provider built into this binary in its own process and serves
it over the provider plugin contract (gRPC, plugin/providerv1alpha1), for a
daemon started with --provider grpc and a provider config naming the same
endpoint.`,
		Example: "  virtual-kubelet plugin --provider mock --nodename vk0 --listen unix:///run/vk/mock.sock",
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			return runPlugin(cmd, o)
		},
	}
	f := cmd.Flags()
	f.StringVar(&o.provider, "provider", "", "the provider to serve (one of: virtual-kubelet providers)")
	f.StringVar(&o.config, "provider-config", "", "the provider's config file")
	f.StringVar(&o.listen, "listen", "", "where to listen: unix:///path/to.sock or host:port")
	f.StringVar(&o.nodeName, "nodename", "virtual-kubelet", "the name of the node the provider backs (the daemon's --nodename)")
	f.StringVar(&o.os, "os", "linux", "the operating system the node runs pods for")
	f.StringVar(&o.clusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain")
	f.StringVar(&o.pprofAddr, "pprof-address", "", "serve Go's /debug/pprof here (a loopback host:port: it has no authentication)")
	f.StringVar(&o.tlsCert, "tls-cert-file", "", "the plugin's serving certificate (PEM), for mutual TLS")
	f.StringVar(&o.tlsKey, "tls-key-file", "", "its private key (PEM)")
	f.StringVar(&o.tlsClientCA, "tls-client-ca-file", "", "the CA (PEM) that signed the daemon's client certificate")
	f.BoolVar(&o.insecure, "insecure", false, "serve a host:port --listen without TLS: anyone who reaches the port controls every pod (tests only)")
	f.StringVar(&o.socketMode, "socket-mode", "0600", "the permission bits (octal) of a unix:// --listen socket: who may connect")
	return cmd
}

func runPlugin(cmd *cobra.Command, o *pluginOptions) error {
	if o.provider == "" || o.listen == "" {
		return errors.New("plugin: --provider and --listen are required")
	}
	l, err := o.listener(cmd)
	if err != nil {
		return fmt.Errorf("plugin: %w", err)
	}
	var opts []grpc.ServerOption
	if l.tls != nil {
		opts = append(opts, grpc.Creds(l.tls))
	}
	initFunc, err := provider.Get(o.provider)
	if err != nil {
		return err
	}
	ctx := cmd.Context()
	p, err := initFunc(ctx, provider.InitConfig{ConfigPath: o.config, NodeName: o.nodeName, OperatingSystem: o.os, ClusterDomain: o.clusterDomain})
	if err != nil {
		return fmt.Errorf("provider %s: %w", o.provider, err)
	}
	lis, err := l.listen()
	if err != nil {
		return err
	}
	if o.pprofAddr != "" {
		if err := servePluginPprof(ctx, o.pprofAddr); err != nil {
			lis.Close()
			return err
		}
	}
	if o.insecure {
		fmt.Fprintf(cmd.ErrOrStderr(), "WARNING: --insecure: serving %s without TLS or client authentication: anyone who reaches it can create pods, read their Secrets and exec into them\n", o.listen)
	}
	fmt.Fprintf(cmd.ErrOrStderr(), "serving provider %s for node %s on %s\n", o.provider, o.nodeName, o.listen)
	return providerserver.Serve(ctx, lis, p, opts...)
}

// servePluginPprof serves /debug/pprof on addr, a loopback address, until
// ctx ends.
func servePluginPprof(ctx context.Context, addr string) error {
	host, _, err := net.SplitHostPort(addr)
	if err != nil || !isLoopback(host) {
		return fmt.Errorf("--pprof-address %q: want a loopback host:port (127.0.0.1:6060): /debug/pprof has no authentication", addr)
	}
	lis, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("--pprof-address: %w", err)
	}
	mux := http.NewServeMux()
	servePprof(mux)
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 30 * time.Second}
	go func() {
		<-ctx.Done()
		srv.Close()
	}()
	go srv.Serve(lis) //nolint:errcheck // ends with ErrServerClosed when ctx does
	return nil
}

// serverTLS is mutual TLS: the plugin's certificate, and only clients with
// a certificate of clientCA.
func serverTLS(certFile, keyFile, clientCAFile string) (credentials.TransportCredentials, error) {
	if certFile == "" || keyFile == "" || clientCAFile == "" {
		return nil, errors.New("--tls-cert-file, --tls-key-file and --tls-client-ca-file go together")
	}
	cert, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-cert-file/--tls-key-file: %w", err)
	}
	ca, err := os.ReadFile(clientCAFile)
	if err != nil {
		return nil, fmt.Errorf("--tls-client-ca-file: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(ca) {
		return nil, fmt.Errorf("--tls-client-ca-file %s: no PEM certificate in it", clientCAFile)
	}
	return credentials.NewTLS(&tls.Config{
		Certificates: []tls.Certificate{cert}, ClientCAs: pool, ClientAuth: tls.RequireAndVerifyClientCert, MinVersion: tls.VersionTLS12,
	}), nil
}
