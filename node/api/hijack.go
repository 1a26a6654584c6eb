package api

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"io"
	"net"
	"net/http"
	"sync"
	"time"
)

// watchHijack makes r's context end when the connection is gone. Once a
// handler hijacks a connection (for SPDY or WebSocket), net/http stops
// watching it, and the request's context would live until the handler
// returns even if the client left; the handler functions of a session get
// this context, so that they stop when the client does. The context's klog
// logger reports the session's own close at debug (see withQuietClose).
//
// It answers 500 and returns ok false if w cannot be hijacked at all (an
// HTTP/2 stream, a test recorder), which the WebSocket server would not
// survive.
func watchHijack(w http.ResponseWriter, r *http.Request) (_ http.ResponseWriter, _ *http.Request, ok bool) {
	if !canHijack(w) {
		http.Error(w, "unable to upgrade: the connection cannot be hijacked", http.StatusInternalServerError)
		return nil, nil, false
	}
	ctx, cancel := context.WithCancel(withQuietClose(r.Context())) //nolint:gosec // G118: the watcher calls cancel when the connection ends
	return &hijackWatcher{ResponseWriter: w, cancel: cancel}, r.WithContext(ctx), true
}

// canHijack reports whether w, or a writer it wraps, is an http.Hijacker.
func canHijack(w http.ResponseWriter) bool {
	for range 100 { // a chain longer than that is surely a cycle
		if _, ok := w.(http.Hijacker); ok {
			return true
		}
		u, ok := w.(interface{ Unwrap() http.ResponseWriter })
		if !ok {
			return false
		}
		if w = u.Unwrap(); w == nil {
			return false
		}
	}
	return false
}

// hijackWatcher is a ResponseWriter whose hijacked connection cancels the
// request's context when a read fails or it is closed. It deliberately has
// no Unwrap method: the streaming servers must hijack through it.
type hijackWatcher struct {
	http.ResponseWriter
	cancel context.CancelFunc
}

func (h *hijackWatcher) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	conn, rw, err := http.NewResponseController(h.ResponseWriter).Hijack()
	if err != nil {
		return nil, nil, err
	}
	wc := &watchedConn{Conn: conn, cancel: h.cancel}
	// Keep what the server has already read from the client.
	var r io.Reader = wc
	if n := rw.Reader.Buffered(); n > 0 {
		b, _ := rw.Reader.Peek(n)
		r = io.MultiReader(bytes.NewReader(bytes.Clone(b)), wc)
	}
	if err := rw.Writer.Flush(); err != nil {
		_ = conn.Close()
		return nil, nil, err
	}
	return wc, bufio.NewReadWriter(bufio.NewReader(r), bufio.NewWriter(wc)), nil
}

// Flush keeps the ResponseWriter a Flusher for the non-upgrade answers.
func (h *hijackWatcher) Flush() {
	_ = http.NewResponseController(h.ResponseWriter).Flush()
}

// watchedConn cancels a context when reading fails or it is closed.
type watchedConn struct {
	net.Conn
	cancel context.CancelFunc
	once   sync.Once

	closeOnce sync.Once
	closeErr  error
}

func (c *watchedConn) Read(b []byte) (int, error) {
	n, err := c.Conn.Read(b)
	if err != nil {
		c.once.Do(c.cancel)
	}
	return n, err
}

// Close ends the connection without a reset (see lingeringClose); the
// session's own reader and its handler may both call it.
func (c *watchedConn) Close() error {
	c.once.Do(c.cancel)
	c.closeOnce.Do(func() { c.closeErr = lingeringClose(c.Conn) })
	return c.closeErr
}

// Bounds of lingeringClose: how long it waits for the peer to close, and
// how much of what the peer still sends it reads meanwhile.
const (
	lingerTimeout  = time.Second
	lingerMaxBytes = 256 << 10
)

// lingeringClose closes conn as net/http closes its own connections. A
// socket closed while bytes it received are unread (a client's WebSocket
// ping that came in with the session's last frames) is reset, not shut
// down; a peer that gets the reset may drop what it had not read yet,
// such as a session's final status. So it shuts down the writing side
// first, then reads and discards until the peer closes too, or for
// lingerTimeout at most, and only then closes.
func lingeringClose(conn net.Conn) error {
	if !closeWrite(conn) {
		return conn.Close()
	}
	// Close ends a read still blocked at the bound, whatever deadline the
	// session's reader set meanwhile.
	bound := time.AfterFunc(lingerTimeout, func() { _ = conn.Close() })
	_, _ = io.Copy(io.Discard, io.LimitReader(conn, lingerMaxBytes))
	if !bound.Stop() {
		return nil // closed at the bound
	}
	return conn.Close()
}

// closeWrite shuts down the writing side of conn: a TLS close_notify and
// then the TCP FIN under it. It reports whether conn could do that.
func closeWrite(conn net.Conn) bool {
	type closeWriter interface{ CloseWrite() error }
	if tc, ok := conn.(*tls.Conn); ok {
		if tc.CloseWrite() != nil {
			return false
		}
		conn = tc.NetConn()
	}
	cw, ok := conn.(closeWriter)
	return ok && cw.CloseWrite() == nil
}
