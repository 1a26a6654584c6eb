package kubernetes

import (
	"context"
	"encoding/json"
	"encoding/pem"
	"errors"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8stypes "k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/remotecommand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/util/exec"
	"k8s.io/streaming/pkg/httpstream"
	"k8s.io/streaming/pkg/httpstream/spdy"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/node/api"
)

// hangGuard is how long a test waits for what must happen long before;
// only a hang reaches it.
const hangGuard = 30 * time.Second

// streamProvider is a provider whose B is the server at cfg.Host, with an
// offloaded pod team/shell and setup bound timeout.
func streamProvider(t *testing.T, cfg *rest.Config, timeout time.Duration) *Provider {
	t.Helper()
	p, _, localPods := objectsProvider(t, Config{Remote: RemoteConfig{UpgradeTimeout: metav1.Duration{Duration: timeout}}})
	if err := p.pods.AddIndexers(cache.Indexers{sourceIndex: p.indexBySource}); err != nil {
		t.Fatal(err)
	}
	madeInB(t, p, localPods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "team", Name: "shell", UID: k8stypes.UID("uid-shell")},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}})
	client, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	p.remote, p.remoteConfig = client, cfg
	return p
}

// output is the stdout of an exec session.
type output struct{ childproc.Output }

func (o *output) Close() error { return nil }

// stdoutOnly is the AttachIO of `kubectl exec POD -- CMD`: stdout only.
type stdoutOnly struct{ out *output }

func (a stdoutOnly) Stdin() io.Reader            { return nil }
func (a stdoutOnly) Stdout() io.WriteCloser      { return a.out }
func (a stdoutOnly) Stderr() io.WriteCloser      { return nil }
func (a stdoutOnly) TTY() bool                   { return false }
func (a stdoutOnly) Resize() <-chan api.TermSize { return nil }

// execResult runs `exec shell -- cmd` against p and returns its error,
// failing the test if it hangs.
func execResult(t *testing.T, ctx context.Context, p *Provider, out *output) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- p.RunInContainer(ctx, "team", "shell", "c", []string{"cmd"}, stdoutOnly{out}) }()
	select {
	case err := <-done:
		return err
	case <-time.After(hangGuard):
		t.Fatal("exec did not return")
		return nil
	}
}

// silentListener accepts connections and never answers; each accepted
// connection's end (the client closing it) is sent on closed.
func silentListener(t *testing.T) (addr string, closed <-chan error) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	ends := make(chan error, 4)
	go func() {
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			go func() {
				defer conn.Close()
				_, err := io.Copy(io.Discard, conn) // the request, then nothing
				ends <- err
			}()
		}
	}()
	return l.Addr().String(), ends
}

// waitClosed fails the test unless the client closes its connection.
func waitClosed(t *testing.T, closed <-chan error) {
	t.Helper()
	select {
	case err := <-closed:
		if err != nil {
			t.Errorf("the connection ended with %v, want the client's close", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("the client never closed its connection: a goroutine stays blocked on it")
	}
}

// TestExecSetupTimeout: a B that accepts the connection and never answers
// the upgrade ends the exec with an error naming the bound, and the
// connection is closed, not left with a goroutine reading it.
func TestExecSetupTimeout(t *testing.T) {
	addr, closed := silentListener(t)
	p := streamProvider(t, &rest.Config{Host: "http://" + addr}, 200*time.Millisecond)
	err := execResult(t, context.Background(), p, &output{})
	if err == nil || !strings.Contains(err.Error(), "did not set up the connection within 200ms (remote.upgradeTimeout)") {
		t.Fatalf("exec against a silent B: %v, want the setup timeout", err)
	}
	waitClosed(t, closed)
}

// TestExecSetupCancelled: the caller going away (kubectl interrupted,
// the daemon stopping) ends a setup B does not answer, long before the
// bound, with the connection closed.
func TestExecSetupCancelled(t *testing.T) {
	addr, closed := silentListener(t)
	p := streamProvider(t, &rest.Config{Host: "http://" + addr}, time.Hour)
	ctx, cancel := context.WithCancel(context.Background())
	time.AfterFunc(100*time.Millisecond, cancel)
	if err := execResult(t, ctx, p, &output{}); err == nil {
		t.Fatal("exec with its context cancelled during the setup: nil error")
	}
	waitClosed(t, closed)
}

// TestPortForwardSetupTimeout: port-forward's connection has the same bound.
func TestPortForwardSetupTimeout(t *testing.T) {
	addr, closed := silentListener(t)
	p := streamProvider(t, &rest.Config{Host: "http://" + addr}, 200*time.Millisecond)
	done := make(chan error, 1)
	local, _ := net.Pipe()
	go func() { done <- p.PortForward(context.Background(), "team", "shell", 80, local) }()
	select {
	case err := <-done:
		if err == nil || !strings.Contains(err.Error(), "did not set up the connection within 200ms") {
			t.Fatalf("port-forward against a silent B: %v, want the setup timeout", err)
		}
	case <-time.After(hangGuard):
		t.Fatal("port-forward did not return")
	}
	waitClosed(t, closed)
}

// sessionEnd is how the fake B ends an exec session after writing
// "partial" to stdout.
type sessionEnd struct {
	status *metav1.Status // written on the error stream; nil: none
	wait   time.Duration  // before the end, the session established
}

// fakeB is an API server of B that upgrades exec requests to SPDY with
// protocol v4 (the library's own server side) and ends every session as
// end says.
func fakeB(t *testing.T, end sessionEnd) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if _, err := httpstream.Handshake(r, w, []string{remotecommand.StreamProtocolV4Name}); err != nil {
			t.Errorf("handshake: %v", err)
			return
		}
		streams := make(chan httpstream.Stream, 4)
		conn := spdy.NewResponseUpgrader().UpgradeResponse(w, r, func(s httpstream.Stream, _ <-chan struct{}) error {
			streams <- s
			return nil
		})
		if conn == nil {
			t.Error("upgrade failed")
			return
		}
		defer conn.Close()
		var errorStream, stdout httpstream.Stream
		for errorStream == nil || stdout == nil {
			select {
			case s := <-streams:
				switch s.Headers().Get(corev1.StreamType) {
				case corev1.StreamTypeError:
					errorStream = s
				case corev1.StreamTypeStdout:
					stdout = s
				}
			case <-time.After(hangGuard):
				t.Error("the client opened no error and stdout streams")
				return
			}
		}
		if _, err := stdout.Write([]byte("partial")); err != nil {
			t.Errorf("stdout: %v", err)
		}
		select {
		case <-time.After(end.wait):
		case <-conn.CloseChan(): // the client went
		}
		if end.status != nil {
			b, err := json.Marshal(end.status)
			if err != nil {
				t.Error(err)
			}
			if _, err := errorStream.Write(b); err != nil {
				t.Errorf("error stream: %v", err)
			}
			errorStream.Close()
			stdout.Close()
		}
		// Without a status: the connection just goes, as when B's API
		// server or the network to it does.
	})
}

// TestExecSessionDropped: a session B drops without a status, after some
// output, is an error, not a success.
func TestExecSessionDropped(t *testing.T) {
	srv := httptest.NewServer(fakeB(t, sessionEnd{}))
	defer srv.Close()
	p := streamProvider(t, &rest.Config{Host: srv.URL}, 5*time.Second)
	out := &output{}
	err := execResult(t, context.Background(), p, out)
	if !errors.Is(err, errNoExitStatus) {
		t.Fatalf("exec whose session B dropped: %v, want %v", err, errNoExitStatus)
	}
}

// TestExecSessionSucceeds: a session ending with B's Success status is a
// success, over TLS with B's CA, and the setup bound does not limit an
// established session that outlasts it.
func TestExecSessionSucceeds(t *testing.T) {
	// The bound leaves a loaded machine (CI, -race) time for the TLS
	// handshake; the session outlasts it twice over.
	const bound = 1500 * time.Millisecond
	srv := httptest.NewTLSServer(fakeB(t, sessionEnd{status: &metav1.Status{Status: metav1.StatusSuccess}, wait: 2 * bound}))
	defer srv.Close()
	ca := pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
	p := streamProvider(t, &rest.Config{Host: srv.URL, TLSClientConfig: rest.TLSClientConfig{CAData: ca}}, bound)
	out := &output{}
	if err := execResult(t, context.Background(), p, out); err != nil {
		t.Fatalf("exec ending with Success: %v", err)
	}
	if out.String() != "partial" {
		t.Errorf("stdout %q, want %q", out.String(), "partial")
	}
}

// TestExecUnverifiedB: a B whose certificate the config's CA does not
// sign is refused, also when the config names no CA at all (the system
// roots, never no verification).
func TestExecUnverifiedB(t *testing.T) {
	srv := httptest.NewTLSServer(fakeB(t, sessionEnd{status: &metav1.Status{Status: metav1.StatusSuccess}}))
	defer srv.Close()
	p := streamProvider(t, &rest.Config{Host: srv.URL}, 5*time.Second)
	err := execResult(t, context.Background(), p, &output{})
	if err == nil || !strings.Contains(err.Error(), "certificate") {
		t.Fatalf("exec against a B of an unknown CA: %v, want a certificate error", err)
	}
}

// TestExecExitCode: a non-zero exit still comes back as client-go's
// exec.CodeExitError with its code.
func TestExecExitCode(t *testing.T) {
	srv := httptest.NewServer(fakeB(t, sessionEnd{status: &metav1.Status{
		Status: metav1.StatusFailure, Reason: remotecommand.NonZeroExitCodeReason,
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: remotecommand.ExitCodeCauseType, Message: "3"}}},
	}}))
	defer srv.Close()
	p := streamProvider(t, &rest.Config{Host: srv.URL}, 5*time.Second)
	var exitErr exec.CodeExitError
	if err := execResult(t, context.Background(), p, &output{}); !errors.As(err, &exitErr) || exitErr.Code != 3 {
		t.Fatalf("exec exiting 3: %v, want exec.CodeExitError with code 3", err)
	}
}

// TestExecCancelledSession: our own context ending an established session
// is reported as before, the context's error, not a dropped session.
func TestExecCancelledSession(t *testing.T) {
	srv := httptest.NewServer(fakeB(t, sessionEnd{wait: hangGuard / 10}))
	defer srv.Close()
	p := streamProvider(t, &rest.Config{Host: srv.URL}, 5*time.Second)
	ctx, cancel := context.WithCancel(context.Background())
	out := &output{}
	go func() {
		for out.String() == "" {
			time.Sleep(10 * time.Millisecond)
		}
		cancel()
	}()
	if err := execResult(t, ctx, p, out); !errors.Is(err, context.Canceled) {
		t.Fatalf("exec cancelled by its caller: %v, want %v", err, context.Canceled)
	}
}

// TestUpgradeTimeoutConfig: remote.upgradeTimeout is a duration, not
// negative, 30 s if not set.
func TestUpgradeTimeoutConfig(t *testing.T) {
	kubeconfig := writeConfig(t, "apiVersion: v1\nkind: Config\n")
	base := "namespace: a\nsourceCluster: a\nsigningKeyFile: /k\nremote: {kubeconfig: " + kubeconfig
	cfg, err := LoadConfig(writeConfig(t, base+", upgradeTimeout: 45s}"))
	if err != nil || cfg.upgradeTimeout() != 45*time.Second {
		t.Fatalf("upgradeTimeout: 45s: %v, %v", cfg, err)
	}
	if cfg, err = LoadConfig(writeConfig(t, base+"}")); err != nil || cfg.upgradeTimeout() != DefaultUpgradeTimeout {
		t.Fatalf("no upgradeTimeout: %v, %v; want %s", cfg, err, DefaultUpgradeTimeout)
	}
	for bad, want := range map[string]string{"-1s": "remote.upgradeTimeout: must not be negative, got -1s", "soon": `invalid duration "soon"`} {
		if _, err := LoadConfig(writeConfig(t, base+", upgradeTimeout: "+bad+"}")); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("upgradeTimeout: %s: %v, want an error containing %q", bad, err, want)
		}
	}
}

// TestExecThroughProxy: with a proxy for B in the config, exec goes
// through it (client-go's own connection) and a dropped session is still
// told from a successful one.
func TestExecThroughProxy(t *testing.T) {
	for _, tt := range []struct {
		name string
		end  sessionEnd
		want error
	}{
		{"success", sessionEnd{status: &metav1.Status{Status: metav1.StatusSuccess}}, nil},
		{"dropped", sessionEnd{}, errNoExitStatus},
	} {
		t.Run(tt.name, func(t *testing.T) {
			srv := httptest.NewServer(fakeB(t, tt.end))
			defer srv.Close()
			var tunnels atomic.Int32
			proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if r.Method != http.MethodConnect {
					http.Error(w, "CONNECT only", http.StatusMethodNotAllowed)
					return
				}
				target, err := net.Dial("tcp", r.Host)
				if err != nil {
					http.Error(w, err.Error(), http.StatusBadGateway)
					return
				}
				defer target.Close()
				tunnels.Add(1)
				w.WriteHeader(http.StatusOK)
				client, buf, err := http.NewResponseController(w).Hijack()
				if err != nil {
					t.Error(err)
					return
				}
				defer client.Close()
				go func() { _, _ = io.Copy(target, buf) }()
				_, _ = io.Copy(client, target)
			}))
			defer proxy.Close()
			proxyURL, err := url.Parse(proxy.URL)
			if err != nil {
				t.Fatal(err)
			}
			p := streamProvider(t, &rest.Config{Host: srv.URL, Proxy: http.ProxyURL(proxyURL)}, 5*time.Second)
			out := &output{}
			if err := execResult(t, context.Background(), p, out); !errors.Is(err, tt.want) || (tt.want == nil && err != nil) {
				t.Fatalf("exec through the proxy: %v, want %v", err, tt.want)
			}
			if tunnels.Load() != 1 {
				t.Errorf("%d tunnels through the proxy, want 1", tunnels.Load())
			}
		})
	}
}
