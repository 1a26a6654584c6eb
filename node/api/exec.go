package api

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/cri-streaming/pkg/streaming/remotecommand"
	"k8s.io/streaming/pkg/httpstream/wsstream"
	utilexec "k8s.io/utils/exec"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// streamOptions are the streams an exec or attach client asks for.
type streamOptions struct {
	stdin, stdout, stderr, tty bool
}

// parseStreamOptions reads the stream flags of an exec or attach request:
// input (or stdin), output (or stdout), error (or stderr) and tty, each
// true when "1" or a strconv.ParseBool true value. With a TTY, stderr is
// merged into stdout.
func parseStreamOptions(q url.Values) (streamOptions, error) {
	flag := func(names ...string) (bool, error) {
		for _, n := range names {
			v := q.Get(n)
			if v == "" {
				continue
			}
			b, err := strconv.ParseBool(v)
			if err != nil {
				return false, errdefs.InvalidInputf("%s: %q is not a boolean", n, v)
			}
			if b {
				return true, nil
			}
		}
		return false, nil
	}
	var o streamOptions
	var err error
	if o.stdin, err = flag(remotecommand.ExecStdinParam, "stdin"); err != nil {
		return o, err
	}
	if o.stdout, err = flag(remotecommand.ExecStdoutParam, "stdout"); err != nil {
		return o, err
	}
	if o.stderr, err = flag(remotecommand.ExecStderrParam, "stderr"); err != nil {
		return o, err
	}
	if o.tty, err = flag(remotecommand.ExecTTYParam); err != nil {
		return o, err
	}
	if o.tty {
		o.stderr = false
	}
	if !o.stdin && !o.stdout && !o.stderr {
		return o, errdefs.InvalidInput("at least one of stdin, stdout and stderr must be requested")
	}
	return o, nil
}

func (o streamOptions) remotecommand() *remotecommand.Options {
	return &remotecommand.Options{Stdin: o.stdin, Stdout: o.stdout, Stderr: o.stderr, TTY: o.tty}
}

// session runs a handler function over a client's streams.
type session func(ctx context.Context, attach AttachIO) error

func (s *server) exec(w http.ResponseWriter, r *http.Request) {
	if s.cfg.RunInContainer == nil {
		notImplemented(w, "exec")
		return
	}
	cmd := r.URL.Query()["command"]
	if len(cmd) == 0 {
		http.Error(w, "command: at least one command parameter is required", http.StatusBadRequest)
		return
	}
	ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	run := func(ctx context.Context, a AttachIO) error {
		return s.cfg.RunInContainer(ctx, ns, pod, container, cmd, a)
	}
	s.serveRemoteCommand(w, r, cmd, run)
}

func (s *server) attach(w http.ResponseWriter, r *http.Request) {
	if s.cfg.AttachToContainer == nil {
		notImplemented(w, "attach")
		return
	}
	ns, pod, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("container")
	run := func(ctx context.Context, a AttachIO) error {
		return s.cfg.AttachToContainer(ctx, ns, pod, container, a)
	}
	s.serveRemoteCommand(w, r, nil, run)
}

// serveRemoteCommand validates an exec (cmd != nil) or attach request, then
// serves it over SPDY or WebSocket.
func (s *server) serveRemoteCommand(w http.ResponseWriter, r *http.Request, cmd []string, run session) {
	opts, err := parseStreamOptions(r.URL.Query())
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	ns, pod, uid, container := r.PathValue("namespace"), r.PathValue("pod"), r.PathValue("uid"), r.PathValue("container")
	if err := s.findPod(r.Context(), ns, pod, uid, container); err != nil {
		writeError(r.Context(), w, err)
		return
	}
	w, r, ok := watchHijack(w, r)
	if !ok {
		return
	}
	if wsstream.IsWebSocketRequestWithStreamCloseProtocol(r) {
		// cri-streaming speaks the WebSocket protocols up to v4; v5 (which
		// adds closing stdin) is served here.
		serveWebSocketV5(w, r, opts, s.cfg.StreamIdleTimeout, run, cmd != nil)
		return
	}
	a := &remoteCommandAdapter{opts: opts, run: run}
	key := ns + "/" + pod
	if cmd != nil {
		remotecommand.ServeExec(w, r, a, key, uid, container, cmd, opts.remotecommand(),
			s.cfg.StreamIdleTimeout, s.cfg.StreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
		return
	}
	remotecommand.ServeAttach(w, r, a, key, uid, container, opts.remotecommand(),
		s.cfg.StreamIdleTimeout, s.cfg.StreamCreationTimeout, remotecommand.SupportedStreamingProtocols)
}

// remoteCommandAdapter is the remotecommand.Executor and Attacher of one
// request, calling the provider's handler function.
type remoteCommandAdapter struct {
	opts streamOptions
	run  session
}

func (a *remoteCommandAdapter) ExecInContainer(ctx context.Context, _, _, _ string, _ []string, in io.Reader, out, errOut io.WriteCloser, _ bool, resize <-chan remotecommand.TerminalSize, _ time.Duration) error {
	return exitError(runSession(ctx, a.opts, in, out, errOut, resize, a.run))
}

func (a *remoteCommandAdapter) AttachContainer(ctx context.Context, _, _, _ string, in io.Reader, out, errOut io.WriteCloser, _ bool, resize <-chan remotecommand.TerminalSize) error {
	return runSession(ctx, a.opts, in, out, errOut, resize, a.run)
}

// exitError returns the utilexec.ExitError err wraps, if any, since the
// streaming server only recognizes one at the top of the chain; nil for an
// exit code of 0; otherwise err.
func exitError(err error) error {
	var ee utilexec.ExitError
	if errors.As(err, &ee) && ee.Exited() {
		if ee.ExitStatus() == 0 {
			return nil
		}
		return ee
	}
	return err
}

// runSession runs a session over the given streams, keeping only those the
// client asked for.
func runSession(ctx context.Context, opts streamOptions, in io.Reader, out, errOut io.WriteCloser, resize <-chan remotecommand.TerminalSize, run session) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	a := &attachIO{tty: opts.tty}
	if opts.stdin {
		a.stdin = in
	}
	if opts.stdout {
		a.stdout = out
	}
	if opts.stderr && !opts.tty {
		a.stderr = errOut
	}
	if opts.tty {
		sizes := make(chan TermSize)
		a.resize = sizes
		go forwardResizes(ctx, resize, sizes)
	}
	err := run(ctx, a)
	// A session cut short by the server (shutting down) tells the client
	// why rather than "context canceled".
	if err != nil && errors.Is(err, context.Canceled) {
		if cause := context.Cause(ctx); cause != nil && !errors.Is(cause, context.Canceled) {
			err = cause
		}
	}
	return err
}

// forwardResizes copies terminal sizes from the streaming server to the
// session until either side is done, then closes to.
func forwardResizes(ctx context.Context, from <-chan remotecommand.TerminalSize, to chan<- TermSize) {
	defer close(to)
	for {
		select {
		case <-ctx.Done():
			return
		case size, ok := <-from: // never ready when from is nil
			if !ok {
				// No more resizes, but the channel stays open for the
				// session's life: a closed channel would read as "done".
				<-ctx.Done()
				return
			}
			select {
			case to <- TermSize{Width: size.Width, Height: size.Height}:
			case <-ctx.Done():
				return
			}
		}
	}
}

// attachIO is the AttachIO of a session.
type attachIO struct {
	stdin          io.Reader
	stdout, stderr io.WriteCloser
	tty            bool
	resize         chan TermSize
}

func (a *attachIO) Stdin() io.Reader       { return a.stdin }
func (a *attachIO) Stdout() io.WriteCloser { return a.stdout }
func (a *attachIO) Stderr() io.WriteCloser { return a.stderr }
func (a *attachIO) TTY() bool              { return a.tty }

func (a *attachIO) Resize() <-chan TermSize { return a.resize }

// The channels of the remotecommand WebSocket protocols.
const (
	wsStdin = iota
	wsStdout
	wsStderr
	wsError
	wsResize
)

// statusWriteTimeout bounds writing the final status of a session.
const statusWriteTimeout = 10 * time.Second

// serveWebSocketV5 serves an exec or attach session over the WebSocket
// protocol v5.channel.k8s.io: channels 0-2 are stdin, stdout and stderr, 3
// carries the final metav1.Status (with the exit code), 4 the terminal
// sizes as JSON, and a message {255, n} from the client closes channel n.
func serveWebSocketV5(w http.ResponseWriter, r *http.Request, opts streamOptions, idleTimeout time.Duration, run session, isExec bool) {
	ctx := r.Context()
	readable := func(b bool) wsstream.ChannelType {
		if b {
			return wsstream.ReadChannel
		}
		return wsstream.IgnoreChannel
	}
	writable := func(b bool) wsstream.ChannelType {
		if b {
			return wsstream.WriteChannel
		}
		return wsstream.IgnoreChannel
	}
	conn := wsstream.NewConn(map[string]wsstream.ChannelProtocolConfig{
		remotecommand.StreamProtocolV5Name: {Binary: true, Channels: []wsstream.ChannelType{
			wsStdin:  readable(opts.stdin),
			wsStdout: writable(opts.stdout),
			wsStderr: writable(opts.stderr),
			wsError:  wsstream.WriteChannel,
			wsResize: wsstream.ReadChannel,
		}},
	})
	conn.SetIdleTimeout(idleTimeout)
	_, streams, err := conn.Open(w, r)
	if err != nil {
		log.G(ctx).WithError(err).Debug("kubelet API: websocket upgrade failed")
		return
	}
	defer conn.Close()

	// An empty message on the first writable channel tells the client its
	// streams are ready.
	first := streams[wsError]
	switch {
	case opts.stdout:
		first = streams[wsStdout]
	case opts.stderr:
		first = streams[wsStderr]
	}
	if _, err := first.Write(nil); err != nil {
		return
	}

	var resize chan remotecommand.TerminalSize
	if opts.tty {
		resize = make(chan remotecommand.TerminalSize)
		go decodeResizes(ctx, streams[wsResize], resize)
	}
	err = runSession(ctx, opts, streams[wsStdin], streams[wsStdout], streams[wsStderr], resize, run)
	b, merr := json.Marshal(sessionStatus(err, isExec))
	if merr != nil {
		return
	}
	conn.SetWriteDeadline(statusWriteTimeout)
	_, _ = streams[wsError].Write(b)
}

// decodeResizes reads JSON terminal sizes until the stream ends.
func decodeResizes(ctx context.Context, r io.Reader, to chan<- remotecommand.TerminalSize) {
	defer close(to)
	d := json.NewDecoder(r)
	for {
		var size remotecommand.TerminalSize
		if err := d.Decode(&size); err != nil {
			return
		}
		select {
		case to <- size:
		case <-ctx.Done():
			return
		}
	}
}

// sessionStatus is the status that ends a session over the protocols v4
// and v5: success, a non-zero exit code (of an exec session), a feature
// the provider does not serve (501), or an internal error, worded as the
// streaming server words them.
func sessionStatus(err error, isExec bool) metav1.Status {
	if errdefs.IsNotImplemented(err) {
		return metav1.Status{Status: metav1.StatusFailure, Code: http.StatusNotImplemented, Message: err.Error()}
	}
	if !isExec {
		if err == nil {
			return metav1.Status{Status: metav1.StatusSuccess}
		}
		return apierrors.NewInternalError(fmt.Errorf("error attaching to container: %v", err)).ErrStatus
	}
	err = exitError(err)
	if err == nil {
		return metav1.Status{Status: metav1.StatusSuccess}
	}
	var ee utilexec.ExitError
	if errors.As(err, &ee) {
		return metav1.Status{
			Status:  metav1.StatusFailure,
			Reason:  remotecommand.NonZeroExitCodeReason,
			Message: fmt.Sprintf("command terminated with non-zero exit code: %v", err),
			Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{
				Type:    remotecommand.ExitCodeCauseType,
				Message: strconv.Itoa(ee.ExitStatus()),
			}}},
		}
	}
	return apierrors.NewInternalError(fmt.Errorf("error executing command in container: %v", err)).ErrStatus
}
