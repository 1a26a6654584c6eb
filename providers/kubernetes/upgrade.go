package kubernetes

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	remotecommandconsts "k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/transport/spdy"
	streamspdy "k8s.io/streaming/pkg/httpstream/spdy"
)

// DefaultUpgradeTimeout bounds the setup of an exec, attach or
// port-forward connection to B's API server when the config sets none:
// the kubelet's stream creation timeout.
const DefaultUpgradeTimeout = 30 * time.Second

// spdyPingPeriod keeps an established connection alive through idle
// proxies, as client-go's own SPDY round tripper does.
const spdyPingPeriod = 5 * time.Second

// errNoExitStatus is a session that B (or the connection to it) ended
// without the status every server of protocol v4 and later writes.
var errNoExitStatus = errors.New("the remote cluster ended the session without an exit status (its API server or the connection to it went away)")

// remoteSession is one exec, attach or port-forward connection to B's API
// server. It bounds the connection's setup (dial, TLS and the answer to
// the upgrade request) by a timeout and by the caller's context, which
// client-go leaves unbounded once the request is written, and only the
// setup: the established session runs for as long as it lasts. As the
// upgrader it also notes the protocol B chose and counts the bytes of the
// session's error stream, so that a session ended without a status is
// told apart from a successful one (ended).
type remoteSession struct {
	ctx      context.Context
	timeout  time.Duration
	dialer   func(ctx context.Context, network, address string) (net.Conn, error)
	upgrader spdy.Upgrader

	mu          sync.Mutex
	conn        net.Conn  // the connection being set up; nil until dialed
	deadline    time.Time // of the setup, from the dial on
	established bool      // B answered the upgrade: no bound from here on
	stopCut     func() bool

	protocol   atomic.Pointer[string]
	errorBytes atomic.Int64
}

// newRemoteSession returns the transport and the session of one connection
// to target in B, its setup bounded by timeout and ctx. Through a proxy
// (the kubeconfig's proxy-url, or HTTPS_PROXY for B's address) the
// connection is client-go's own, as the upgrade transport that lets the
// provider hold the connection dials B directly: its setup is not
// bounded, the session's end is still checked.
func newRemoteSession(ctx context.Context, cfg *rest.Config, target *url.URL, timeout time.Duration) (http.RoundTripper, *remoteSession, error) {
	s := &remoteSession{ctx: ctx, timeout: timeout, dialer: cfg.Dial}
	if s.dialer == nil {
		s.dialer = (&net.Dialer{}).DialContext
	}
	proxy := cfg.Proxy
	if proxy == nil {
		proxy = http.ProxyFromEnvironment
	}
	if via, err := proxy(&http.Request{URL: target}); err != nil {
		return nil, nil, fmt.Errorf("the proxy to the remote cluster: %w", err)
	} else if via != nil {
		transport, upgrader, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			return nil, nil, err
		}
		s.upgrader = upgrader
		return transport, s, nil
	}
	tlsConfig, err := rest.TLSConfigFor(cfg)
	if err != nil {
		return nil, nil, err
	}
	if tlsConfig == nil {
		// Without it the upgrade transport would skip verifying B's
		// certificate; an empty one verifies against the system roots.
		tlsConfig = &tls.Config{}
	}
	roundTripper, err := streamspdy.NewRoundTripperWithConfig(streamspdy.RoundTripperConfig{
		UpgradeTransport: &http.Transport{DialContext: s.dial, TLSClientConfig: tlsConfig},
		PingPeriod:       spdyPingPeriod,
	})
	if err != nil {
		return nil, nil, err
	}
	transport, err := rest.HTTPWrappersForConfig(cfg, roundTripper)
	if err != nil {
		return nil, nil, err
	}
	s.upgrader = spdy.NewUpgraderForStreaming(roundTripper)
	return transport, s, nil
}

// dial opens the connection to B with a deadline on everything until B
// answers the upgrade, and cuts it short if ctx ends first.
func (s *remoteSession) dial(ctx context.Context, network, address string) (net.Conn, error) {
	s.mu.Lock()
	s.deadline = time.Now().Add(s.timeout)
	deadline := s.deadline
	s.mu.Unlock()
	dialCtx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	// Port-forward's request carries no context: ours ends the dial too.
	defer context.AfterFunc(s.ctx, cancel)()
	conn, err := s.dialer(dialCtx, network, address)
	if err != nil {
		return nil, err
	}
	if err := conn.SetDeadline(deadline); err != nil {
		conn.Close()
		return nil, err
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopCut != nil { // a second dial (a redirect): only the newest is set up
		s.stopCut()
	}
	s.conn = conn
	s.stopCut = context.AfterFunc(s.ctx, s.cut)
	return conn, nil
}

// cut ends a setup in progress: the blocked read or handshake returns
// and client-go closes the connection.
func (s *remoteSession) cut() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn != nil && !s.established {
		_ = s.conn.SetDeadline(time.Unix(1, 0))
	}
}

// NewConnection implements spdy.Upgrader. A 101 answer ends the setup and
// lifts its deadline; any other keeps it, for the read of the error body.
func (s *remoteSession) NewConnection(resp *http.Response) (httpstream.Connection, error) {
	protocol := resp.Header.Get(httpstream.HeaderProtocolVersion)
	s.protocol.Store(&protocol)
	if resp.StatusCode == http.StatusSwitchingProtocols {
		if err := s.establish(); err != nil {
			return nil, err
		}
	}
	conn, err := s.upgrader.NewConnection(resp)
	if err != nil {
		return nil, err
	}
	return &countingConnection{Connection: conn, errorBytes: &s.errorBytes}, nil
}

func (s *remoteSession) establish() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.established = true
	if s.stopCut != nil {
		s.stopCut()
	}
	if s.conn == nil {
		return nil
	}
	return s.conn.SetDeadline(time.Time{})
}

// release stops watching the caller's context; call it when the session
// is over.
func (s *remoteSession) release() {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.stopCut != nil {
		s.stopCut()
	}
}

// setupError names the bound when err is the setup running out of time.
func (s *remoteSession) setupError(err error) error {
	s.mu.Lock()
	expired := !s.established && !s.deadline.IsZero() && !time.Now().Before(s.deadline)
	s.mu.Unlock()
	if !expired || s.ctx.Err() != nil {
		return err
	}
	return fmt.Errorf("the remote cluster's API server did not set up the connection within %s (remote.upgradeTimeout): %w", s.timeout, err)
}

// ended is the outcome of a session client-go reported as err: a setup
// that ran out of time says so, and a nil after protocol v4 or later with
// nothing on the error stream is a session cut short, as such servers
// always write a status there, Success included. Our own context ending
// is no error of B's and stays as is.
func (s *remoteSession) ended(err error) error {
	if err != nil {
		return s.setupError(err)
	}
	if s.ctx.Err() != nil {
		return nil
	}
	protocol := s.protocol.Load()
	if protocol == nil || s.errorBytes.Load() > 0 {
		return nil
	}
	switch *protocol {
	case remotecommandconsts.StreamProtocolV4Name, remotecommandconsts.StreamProtocolV5Name:
		return errNoExitStatus
	}
	return nil
}

// countingConnection counts what the error stream of a session delivers.
type countingConnection struct {
	httpstream.Connection
	errorBytes *atomic.Int64
}

// CreateStream implements httpstream.Connection.
func (c *countingConnection) CreateStream(headers http.Header) (httpstream.Stream, error) {
	stream, err := c.Connection.CreateStream(headers)
	if err != nil || headers.Get(corev1.StreamType) != corev1.StreamTypeError {
		return stream, err
	}
	return &countingStream{Stream: stream, n: c.errorBytes}, nil
}

// countingStream adds what is read from it to n.
type countingStream struct {
	httpstream.Stream
	n *atomic.Int64
}

func (s *countingStream) Read(p []byte) (int, error) {
	n, err := s.Stream.Read(p)
	s.n.Add(int64(n))
	return n, err
}
