package api_test

import (
	"context"
	"net"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-logr/logr"
	gwebsocket "github.com/gorilla/websocket"
	"k8s.io/klog/v2"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

// logEntry is one entry a recordingSink got.
type logEntry struct {
	error bool // Error, not Info
	v     int
	msg   string
	err   error
}

// recordingSink is a logr.LogSink keeping every entry, at every verbosity.
type recordingSink struct {
	mu      sync.Mutex
	entries []logEntry
}

func (s *recordingSink) Init(logr.RuntimeInfo) {}
func (s *recordingSink) Enabled(int) bool      { return true }
func (s *recordingSink) Info(v int, msg string, _ ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, logEntry{v: v, msg: msg})
}

func (s *recordingSink) Error(err error, msg string, _ ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.entries = append(s.entries, logEntry{error: true, msg: msg, err: err})
}
func (s *recordingSink) WithValues(...any) logr.LogSink { return s }
func (s *recordingSink) WithName(string) logr.LogSink   { return s }

// find returns the entries whose message contains msg.
func (s *recordingSink) find(msg string) []logEntry {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []logEntry
	for _, e := range s.entries {
		if strings.Contains(e.msg, msg) {
			out = append(out, e)
		}
	}
	return out
}

// TestStreamNormalCloseIsNotAnError: when a WebSocket exec session ends,
// the server sends the status, closes the connection and, with it, the
// read its WebSocket library has pending; the library's "Error on socket
// receive: use of closed network connection" is logged at debug, not as an
// error. A connection the client resets is still an error.
func TestStreamNormalCloseIsNotAnError(t *testing.T) {
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app"))
	sink := &recordingSink{}
	srv := httptest.NewUnstartedServer(api.PodHandler(f.config(), true))
	srv.Config.BaseContext = func(net.Listener) context.Context {
		return klog.NewContext(context.Background(), logr.New(sink))
	}
	srv.Start()
	t.Cleanup(srv.Close)
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/exec/ns/web/app?command=echo&command=hi&output=1"
	dial := func() *gwebsocket.Conn {
		t.Helper()
		ws, resp, err := (&gwebsocket.Dialer{Subprotocols: []string{"v5.channel.k8s.io"}}).Dial(wsURL, nil)
		if err != nil {
			t.Fatalf("dial: %v (%v)", err, resp)
		}
		t.Cleanup(func() { _ = ws.Close() })
		_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
		return ws
	}
	waitFor := func(msg string) []logEntry {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
			if e := sink.find(msg); len(e) > 0 {
				return e
			}
		}
		t.Fatalf("no log entry %q; entries: %+v", msg, sink.find(""))
		return nil
	}

	// The client reads to the end and neither answers the server's close
	// frame nor closes: the server closes under its own pending read.
	ws := dial()
	ws.SetCloseHandler(func(int, string) error { return nil })
	var status string
	for {
		_, b, err := ws.ReadMessage()
		if err != nil {
			if !gwebsocket.IsCloseError(err, gwebsocket.CloseNormalClosure) {
				t.Fatalf("the session ended with %v, want a normal close frame", err)
			}
			break
		}
		if len(b) > 0 && b[0] == 3 {
			status = string(b[1:])
		}
	}
	if !strings.Contains(status, `"Success"`) {
		t.Errorf("status %q, want Success", status)
	}
	for _, e := range waitFor("Error on socket receive") {
		if e.error {
			t.Errorf("the server's own close logged as an error: %v", e.err)
		} else if e.v == 0 {
			t.Errorf("the server's own close logged at info: %+v", e)
		}
	}

	// A client that resets the connection mid-session is an error.
	sink.mu.Lock()
	sink.entries = nil
	sink.mu.Unlock()
	wsURL = strings.Replace(wsURL, "command=echo&command=hi", "command=wait", 1)
	ws = dial()
	if _, _, err := ws.ReadMessage(); err != nil { // the streams are ready
		t.Fatal(err)
	}
	if tc, ok := ws.NetConn().(*net.TCPConn); ok {
		_ = tc.SetLinger(0) // close with a reset
	}
	_ = ws.NetConn().Close()
	entries := waitFor("Error on socket receive")
	if !entries[0].error {
		t.Errorf("a reset connection logged as %+v, want an error", entries[0])
	}
	select {
	case <-f.waitEnded:
	case <-time.After(10 * time.Second):
		t.Fatalf("the session went on after the reset (%v)", entries)
	}
}
