package api_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime/pprof"
	"strings"
	"testing"
	"time"

	gwebsocket "github.com/gorilla/websocket"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	clientexec "k8s.io/client-go/util/exec"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/node/api"
)

// executorKind makes a client-go executor for an exec or attach URL.
type executorKind struct {
	name string
	new  func(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error)
}

func spdyExecutor(protocols ...string) executorKind {
	name := "spdy"
	if len(protocols) > 0 {
		name += "/" + protocols[0]
	}
	return executorKind{name, func(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error) {
		if len(protocols) == 0 {
			return remotecommand.NewSPDYExecutor(cfg, http.MethodPost, u)
		}
		tr, up, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			return nil, err
		}
		return remotecommand.NewSPDYExecutorForProtocols(tr, up, http.MethodPost, u, protocols...)
	}}
}

func wsExecutor(protocols ...string) executorKind {
	name := "websocket"
	if len(protocols) > 0 {
		name += "/" + protocols[0]
	}
	return executorKind{name, func(cfg *rest.Config, u *url.URL) (remotecommand.Executor, error) {
		if len(protocols) == 0 {
			return remotecommand.NewWebSocketExecutor(cfg, http.MethodGet, u.String())
		}
		return remotecommand.NewWebSocketExecutorForProtocols(cfg, http.MethodGet, u.String(), protocols...)
	}}
}

// The executors client-go uses by default: kubectl tries WebSocket first
// and falls back to SPDY.
var defaultExecutors = []executorKind{spdyExecutor(), wsExecutor()}

// stream runs one session and returns its stdout, stderr and error.
func stream(t *testing.T, k executorKind, cfg *rest.Config, u *url.URL, opts remotecommand.StreamOptions) (string, string, error) {
	t.Helper()
	e, err := k.new(cfg, u)
	if err != nil {
		t.Fatal(err)
	}
	// The client must open the streams the URL asks for, no more.
	// (The kubelet's query says output=1, the apiserver's stdout=true.)
	// Safe for a writer and a reader at once: with protocol v1, client-go
	// returns before its copy of stdout ends.
	var stdout, stderr childproc.Output
	q := u.Query()
	if (q.Get("output") == "1" || q.Get("stdout") == "true") && opts.Stdout == nil {
		opts.Stdout = &stdout
	}
	if (q.Get("error") == "1" || q.Get("stderr") == "true") && opts.Stderr == nil {
		opts.Stderr = &stderr
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	err = e.StreamWithContext(ctx, opts)
	if errors.Is(err, context.DeadlineExceeded) {
		logStuckSession(t, cfg)
	}
	return stdout.String(), stderr.String(), err
}

// streamingFrames names the stacks that tell where a session waits: the
// client's executor, the SPDY and WebSocket streams, the API server's
// translator and proxy, and the node's streaming server.
var streamingFrames = []string{"remotecommand", "spdystream", "httpstream", "wsstream", "util/proxy", "virtual-kubelet/node/api."}

// logStuckSession logs, for a session that timed out, the goroutines of
// this process (the client and, in these tests, the node) and of the
// server cfg names (the API server, when it is one) that were in the
// streaming code: a session that hung once in CI must say where.
func logStuckSession(t *testing.T, cfg *rest.Config) {
	t.Helper()
	var here bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&here, 1)
	t.Logf("the session timed out; goroutines of the test process in the streaming code:\n%s", streamingStacks(here.String()))
	client, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/debug/pprof/goroutine?debug=1", nil)
	if err != nil {
		return
	}
	resp, err := client.Do(req)
	if err != nil {
		t.Logf("the server's goroutines: %v", err)
		return
	}
	defer resp.Body.Close()
	there, _ := io.ReadAll(io.LimitReader(resp.Body, 64<<20))
	t.Logf("goroutines of the server (%s, %s) in the streaming code:\n%s", cfg.Host, resp.Status, streamingStacks(string(there)))
}

// streamingStacks keeps the stacks of a goroutine profile (debug=1) that
// pass through streamingFrames.
func streamingStacks(profile string) string {
	var kept []string
	for _, block := range strings.Split(profile, "\n\n") {
		for _, f := range streamingFrames {
			if strings.Contains(block, f) {
				kept = append(kept, block)
				break
			}
		}
	}
	return strings.Join(kept, "\n\n")
}

// streamURL is base + path with the query of an exec or attach request.
func streamURL(t *testing.T, base, path string, cmd []string, stdin, stdout, stderr, tty bool) *url.URL {
	t.Helper()
	u, err := url.Parse(base + path)
	if err != nil {
		t.Fatal(err)
	}
	q := url.Values{}
	for _, c := range cmd {
		q.Add("command", c)
	}
	flag := func(name string, b bool) {
		if b {
			q.Set(name, "1")
		}
	}
	flag("input", stdin)
	flag("output", stdout)
	flag("error", stderr)
	flag("tty", tty)
	u.RawQuery = q.Encode()
	return u
}

// sizeQueue hands out terminal sizes, then ends.
type sizeQueue struct{ sizes []remotecommand.TerminalSize }

func (q *sizeQueue) Next() *remotecommand.TerminalSize {
	if len(q.sizes) == 0 {
		return nil
	}
	s := q.sizes[0]
	q.sizes = q.sizes[1:]
	return &s
}

// exitCode returns the code of the CodeExitError client-go's executors
// return for an exit code, or -1.
func exitCode(err error) int {
	var ce clientexec.CodeExitError
	if errors.As(err, &ce) {
		return ce.Code
	}
	return -1
}

// checkExecSessions runs the exec and attach checks shared by the unit and
// e2e tests: execPath and attachPath are URLs of the container "app" (or
// of pods/exec and pods/attach through the apiserver), query aside.
func checkExecSessions(t *testing.T, cfg *rest.Config, k executorKind, execURL, attachURL func(cmd []string, stdin, stdout, stderr, tty bool) *url.URL) {
	t.Run("stdin", func(t *testing.T) {
		out, _, err := stream(t, k, cfg, execURL([]string{"cat"}, true, true, false, false),
			remotecommand.StreamOptions{Stdin: strings.NewReader("hello\nworld\n")})
		if err != nil || out != "hello\nworld\n" {
			t.Errorf("cat: %q, %v", out, err)
		}
	})
	t.Run("stdout and stderr", func(t *testing.T) {
		out, _, err := stream(t, k, cfg, execURL([]string{"echo", "hi", "there"}, false, true, true, false), remotecommand.StreamOptions{})
		if err != nil || out != "hi there\n" {
			t.Errorf("echo: %q, %v", out, err)
		}
		_, errOut, err := stream(t, k, cfg, execURL([]string{"warn", "careful"}, false, true, true, false), remotecommand.StreamOptions{})
		if err != nil || errOut != "careful\n" {
			t.Errorf("warn: stderr %q, %v", errOut, err)
		}
	})
	t.Run("exit code", func(t *testing.T) {
		for _, c := range []struct {
			cmd  []string
			code int
		}{{[]string{"exit", "3"}, 3}, {[]string{"wrapexit", "42"}, 42}, {[]string{"no-such-command"}, 127}} {
			_, _, err := stream(t, k, cfg, execURL(c.cmd, false, true, true, false), remotecommand.StreamOptions{})
			if got := exitCode(err); got != c.code {
				t.Errorf("%v: error %v (%T), want exec.CodeExitError with code %d", c.cmd, err, err, c.code)
			}
		}
		_, _, err := stream(t, k, cfg, execURL([]string{"exit", "0"}, false, true, false, false), remotecommand.StreamOptions{})
		if err != nil {
			t.Errorf("exit 0: %v", err)
		}
	})
	t.Run("provider error", func(t *testing.T) {
		// warn without stderr fails in the provider, not with an exit code.
		_, _, err := stream(t, k, cfg, execURL([]string{"warn", "x"}, false, true, false, false), remotecommand.StreamOptions{})
		if err == nil || !strings.Contains(err.Error(), "no stderr") || exitCode(err) != -1 {
			t.Errorf("provider error: %v", err)
		}
	})
	t.Run("tty resize", func(t *testing.T) {
		q := &sizeQueue{sizes: []remotecommand.TerminalSize{{Width: 80, Height: 24}, {Width: 132, Height: 50}}}
		// Stdin stays open until the command has printed both sizes: an
		// early EOF let the session end, under load, before the second
		// resize got through the API server's translation.
		stdin, stdinW := io.Pipe()
		defer stdinW.Close()
		out, _, err := stream(t, k, cfg, execURL([]string{"sizes", "2"}, true, true, false, true),
			remotecommand.StreamOptions{Stdin: stdin, Tty: true, TerminalSizeQueue: q})
		if err != nil || out != "80x24\n132x50\n" {
			t.Errorf("sizes: %q, %v", out, err)
		}
	})
	t.Run("attach", func(t *testing.T) {
		out, _, err := stream(t, k, cfg, attachURL(nil, true, true, false, false),
			remotecommand.StreamOptions{Stdin: strings.NewReader("one\ntwo\n")})
		if want := "hello from app\nattached: one\nattached: two\n"; err != nil || out != want {
			t.Errorf("attach: %q, %v; want %q", out, err, want)
		}
	})
}

func newStreamServer(t *testing.T) (*fakeProvider, *httptest.Server) {
	t.Helper()
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app"))
	srv := httptest.NewServer(api.PodHandler(f.config(), true))
	t.Cleanup(srv.Close)
	return f, srv
}

// TestExecAndAttach runs sessions straight against the handler with
// client-go's SPDY and WebSocket executors.
func TestExecAndAttach(t *testing.T) {
	_, srv := newStreamServer(t)
	cfg := &rest.Config{Host: srv.URL}
	for _, k := range defaultExecutors {
		t.Run(k.name, func(t *testing.T) {
			checkExecSessions(t, cfg, k,
				func(cmd []string, stdin, stdout, stderr, tty bool) *url.URL {
					return streamURL(t, srv.URL, "/exec/ns/web/app", cmd, stdin, stdout, stderr, tty)
				},
				func(_ []string, stdin, stdout, stderr, tty bool) *url.URL {
					return streamURL(t, srv.URL, "/attach/ns/web/app", nil, stdin, stdout, stderr, tty)
				})
		})
	}
}

// TestExecProtocols runs a command over each remotecommand protocol
// version: SPDY v1-v4 (and v5 offered, v4 chosen), WebSocket v1, v4 and v5.
func TestExecProtocols(t *testing.T) {
	_, srv := newStreamServer(t)
	cfg := &rest.Config{Host: srv.URL}
	// v1 cannot report errors (its error stream is reset early, a known
	// bug of the protocol kept for compatibility); v2 and v3 report them
	// as text, v4 and v5 with the exit code.
	for _, c := range []struct {
		k                 executorKind
		errors, exitCodes bool
	}{
		{spdyExecutor("channel.k8s.io"), false, false},
		{spdyExecutor("v2.channel.k8s.io"), true, false},
		{spdyExecutor("v3.channel.k8s.io"), true, false},
		{spdyExecutor("v4.channel.k8s.io"), true, true},
		{spdyExecutor("v5.channel.k8s.io", "v4.channel.k8s.io"), true, true},
		{wsExecutor("channel.k8s.io"), false, false},
		{wsExecutor("v4.channel.k8s.io"), true, true},
		{wsExecutor("v5.channel.k8s.io"), true, true},
	} {
		t.Run(c.k.name, func(t *testing.T) {
			u := streamURL(t, srv.URL, "/exec/ns/web/app", []string{"echo", "hi"}, false, true, true, false)
			var out childproc.Output
			_, _, err := stream(t, c.k, cfg, u, remotecommand.StreamOptions{Stdout: &out})
			if err != nil {
				t.Errorf("echo: %v", err)
			}
			for deadline := time.Now().Add(5 * time.Second); out.String() != "hi\n" && time.Now().Before(deadline); {
				time.Sleep(10 * time.Millisecond)
			}
			if got := out.String(); got != "hi\n" {
				t.Errorf("echo: %q", got)
			}
			u = streamURL(t, srv.URL, "/exec/ns/web/app", []string{"exit", "7"}, false, true, true, false)
			_, _, err = stream(t, c.k, cfg, u, remotecommand.StreamOptions{})
			if c.errors && err == nil {
				t.Fatal("exit 7: no error")
			}
			if c.exitCodes && exitCode(err) != 7 {
				t.Errorf("exit 7: %v, want exit code 7", err)
			}
		})
	}
}

// TestExecClientGoesAway: the session's context ends when the client
// disconnects, though the connection was hijacked.
func TestExecClientGoesAway(t *testing.T) {
	f, srv := newStreamServer(t)
	cfg := &rest.Config{Host: srv.URL}
	for _, k := range defaultExecutors {
		t.Run(k.name, func(t *testing.T) {
			e, err := k.new(cfg, streamURL(t, srv.URL, "/exec/ns/web/app", []string{"wait"}, false, true, false, false))
			if err != nil {
				t.Fatal(err)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 500*time.Millisecond)
			defer cancel()
			_ = e.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: io.Discard})
			select {
			case <-f.waitEnded:
			case <-time.After(10 * time.Second):
				t.Fatal("the provider's session went on after the client left")
			}
		})
	}
}

// dialerKind makes a client-go port-forward dialer for a portForward URL.
type dialerKind struct {
	name string
	new  func(cfg *rest.Config, u *url.URL) (httpstream.Dialer, error)
}

var dialers = []dialerKind{
	{"spdy", func(cfg *rest.Config, u *url.URL) (httpstream.Dialer, error) {
		tr, up, err := spdy.RoundTripperFor(cfg)
		if err != nil {
			return nil, err
		}
		return spdy.NewDialer(up, &http.Client{Transport: tr}, http.MethodPost, u), nil
	}},
	{"websocket", func(cfg *rest.Config, u *url.URL) (httpstream.Dialer, error) {
		return portforward.NewSPDYOverWebsocketDialer(u, cfg)
	}},
}

// checkPortForward forwards local ports to the pod's ports 80 (an echo) and
// 81 (nothing there): bytes come back from 80, over several connections,
// and the provider's error for 81 reaches the client, which then gives up.
func checkPortForward(t *testing.T, cfg *rest.Config, k dialerKind, u *url.URL) {
	t.Helper()
	d, err := k.new(cfg, u)
	if err != nil {
		t.Fatal(err)
	}
	stop, ready := make(chan struct{}), make(chan struct{})
	fw, err := portforward.NewOnAddresses(d, []string{"127.0.0.1"}, []string{"0:80", "0:81"}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- fw.ForwardPorts() }()
	defer func() {
		close(stop)
		_ = <-done // stopped on purpose
	}()
	select {
	case <-ready:
	case err := <-done:
		t.Fatalf("port-forward: %v", err)
	case <-time.After(30 * time.Second):
		t.Fatal("port-forward not ready")
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 2 {
		t.Fatalf("ports %v, %v", ports, err)
	}
	for i := 0; i < 3; i++ {
		conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local))
		if err != nil {
			t.Fatal(err)
		}
		_ = conn.SetDeadline(time.Now().Add(20 * time.Second))
		msg := fmt.Sprintf("ping %d over %s", i, k.name)
		if _, err := conn.Write([]byte(msg)); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, len(msg))
		if _, err := io.ReadFull(conn, got); err != nil || string(got) != msg {
			t.Fatalf("echo: %q, %v", got, err)
		}
		_ = conn.Close()
	}

	conn, err := net.Dial("tcp", fmt.Sprintf("127.0.0.1:%d", ports[1].Local))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_, _ = conn.Write([]byte("anyone?"))
	select {
	case err := <-done:
		done <- err // for the deferred wait
		if !errors.Is(err, portforward.ErrLostConnectionToPod) {
			t.Errorf("port 81: ForwardPorts returned %v", err)
		}
	case <-time.After(20 * time.Second):
		t.Error("port 81: the provider's error did not reach the client")
	}
}

func TestPortForward(t *testing.T) {
	_, srv := newStreamServer(t)
	cfg := &rest.Config{Host: srv.URL}
	u, _ := url.Parse(srv.URL + "/portForward/ns/web")
	for _, k := range dialers {
		t.Run(k.name, func(t *testing.T) { checkPortForward(t, cfg, k, u) })
	}
}

// TestPortForwardWebSocketV4 speaks the older WebSocket port-forward
// protocol, ports in the query: each port has a data and an error channel
// that first carry the port number.
func TestPortForwardWebSocketV4(t *testing.T) {
	_, srv := newStreamServer(t)
	wsURL := "ws" + strings.TrimPrefix(srv.URL, "http") + "/portForward/ns/web?port=80"
	dialer := gwebsocket.Dialer{Subprotocols: []string{"v4.channel.k8s.io"}}
	ws, resp, err := dialer.Dial(wsURL, nil)
	if err != nil {
		t.Fatalf("dial: %v (%v)", err, resp)
	}
	defer ws.Close()
	_ = ws.SetReadDeadline(time.Now().Add(20 * time.Second))
	read := func() []byte {
		t.Helper()
		_, b, err := ws.ReadMessage()
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, ch := range []byte{0, 1} {
		if b := read(); !bytes.Equal(b, []byte{ch, 80, 0}) {
			t.Fatalf("channel %d greeting: %v", ch, b)
		}
	}
	if err := ws.WriteMessage(gwebsocket.BinaryMessage, append([]byte{0}, "ping"...)); err != nil {
		t.Fatal(err)
	}
	var got []byte
	for len(got) < 4 {
		b := read()
		if len(b) > 0 && b[0] == 0 {
			got = append(got, b[1:]...)
		}
	}
	if string(got) != "ping" {
		t.Errorf("echo %q", got)
	}

	// Without ports, the request is refused.
	_, resp, err = dialer.Dial("ws"+strings.TrimPrefix(srv.URL, "http")+"/portForward/ns/web", nil)
	if err == nil || resp == nil || resp.StatusCode != http.StatusBadRequest {
		t.Errorf("no ports: %v, %v", err, resp)
	}
}
