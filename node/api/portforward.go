package api

import (
	"bufio"
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"

	gwebsocket "github.com/gorilla/websocket"
	clientportforward "k8s.io/client-go/tools/portforward"
	"k8s.io/cri-streaming/pkg/streaming/portforward"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"
	"k8s.io/streaming/pkg/httpstream/wsstream"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// portForward serves /portForward over SPDY (portforward.k8s.io), over
// WebSocket with the ports in the query (v4.channel.k8s.io), and over SPDY
// tunneled through a WebSocket (SPDY/3.1+portforward.k8s.io), which is
// what client-go's NewSPDYOverWebsocketDialer speaks.
func (s *server) portForward(w http.ResponseWriter, r *http.Request) {
	if s.cfg.PortForward == nil {
		notImplemented(w, "port forwarding")
		return
	}
	ns, pod, uid := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid")
	tunnel := wsstream.IsWebSocketRequestWithTunnelingProtocol(r)
	opts := &portforward.V4Options{}
	if !tunnel {
		var err error
		if opts, err = portforward.NewV4Options(r); err != nil {
			writeError(r.Context(), w, errdefs.AsInvalidInput(err))
			return
		}
	}
	if err := s.findPod(r.Context(), ns, pod, uid, ""); err != nil {
		writeError(r.Context(), w, err)
		return
	}
	w, r, ok := watchHijack(w, r)
	if !ok {
		return
	}
	pf := &portForwardAdapter{ctx: r.Context(), namespace: ns, pod: pod, forward: s.cfg.PortForward}
	if tunnel {
		tw, spdyReq, ok := upgradeTunnel(w, r)
		if !ok {
			return
		}
		defer tw.conn.Close()
		w, r = tw, spdyReq
	}
	portforward.ServePortForward(w, r, pf, ns+"/"+pod, uid, opts,
		s.cfg.StreamIdleTimeout, s.cfg.StreamCreationTimeout, portforward.SupportedProtocols)
}

// portForwardAdapter is the portforward.PortForwarder of one request. The
// streaming server calls it with a background context; the handler
// function gets the request's instead, which ends with the connection.
type portForwardAdapter struct {
	ctx       context.Context
	namespace string
	pod       string
	forward   PortForwardHandlerFunc
}

func (a *portForwardAdapter) PortForward(_ context.Context, _ string, _ string, port int32, stream io.ReadWriteCloser) error {
	return a.forward(a.ctx, a.namespace, a.pod, port, stream)
}

// upgradeTunnel upgrades a tunneling WebSocket request and returns what
// the SPDY port-forward server needs to run inside the tunnel: a
// ResponseWriter whose Hijack returns the tunnel, and the request turned
// into a SPDY upgrade request. It answers the client itself when the
// upgrade fails.
func upgradeTunnel(w http.ResponseWriter, r *http.Request) (*tunnelWriter, *http.Request, bool) {
	const protocol = portforward.WebsocketsSPDYTunnelingPortForwardV1
	if !containsProtocol(gwebsocket.Subprotocols(r), protocol) {
		http.Error(w, "unable to upgrade: the only tunneling protocol supported is "+protocol, http.StatusBadRequest)
		return nil, nil, false
	}
	upgrader := gwebsocket.Upgrader{
		// Clients authenticate with certificates or tokens, not cookies:
		// cross-origin requests carry no ambient authority.
		CheckOrigin:  func(*http.Request) bool { return true },
		Subprotocols: []string{protocol},
	}
	ws, err := upgrader.Upgrade(w, r, nil)
	if err != nil {
		log.G(r.Context()).WithError(err).Debug("kubelet API: port-forward tunnel upgrade failed")
		return nil, nil, false
	}
	conn := clientportforward.NewTunnelingConnection("server", ws)

	spdyReq := r.Clone(r.Context())
	spdyReq.Method = http.MethodPost
	spdyReq.Body = http.NoBody
	for _, h := range []string{"Sec-Websocket-Key", "Sec-Websocket-Version", "Sec-Websocket-Extensions", wsstream.WebSocketProtocolHeader} {
		spdyReq.Header.Del(h)
	}
	spdyReq.Header.Set(httpstream.HeaderConnection, httpstream.HeaderUpgrade)
	spdyReq.Header.Set(httpstream.HeaderUpgrade, spdy.HeaderSpdy31)
	spdyReq.Header.Set(httpstream.HeaderProtocolVersion, portforward.PortForwardV1Name)
	return &tunnelWriter{conn: conn, header: http.Header{}}, spdyReq, true
}

func containsProtocol(protocols []string, p string) bool {
	for _, q := range protocols {
		if strings.TrimSpace(q) == p {
			return true
		}
	}
	return false
}

// tunnelWriter is the ResponseWriter of a SPDY upgrade inside a WebSocket
// tunnel. The tunnel is already established, so the SPDY server's 101
// answer is dropped (the client does not expect one) and Hijack hands over
// the tunnel.
type tunnelWriter struct {
	conn     net.Conn
	header   http.Header
	hijacked bool
}

func (t *tunnelWriter) Header() http.Header { return t.header }

// Write fails: inside the tunnel there is no HTTP response to write to.
func (t *tunnelWriter) Write(b []byte) (int, error) {
	return 0, errors.New("port-forward tunnel: no HTTP response inside the tunnel")
}

func (t *tunnelWriter) WriteHeader(int) {}

func (t *tunnelWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	if t.hijacked {
		return nil, nil, http.ErrHijacked
	}
	t.hijacked = true
	return t.conn, bufio.NewReadWriter(bufio.NewReader(t.conn), bufio.NewWriter(t.conn)), nil
}
