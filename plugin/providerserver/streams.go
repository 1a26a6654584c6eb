package providerserver

import (
	"errors"
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	utilexec "k8s.io/utils/exec"

	"github.com/vkubelet/virtual-kubelet/node/api"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// Exec implements pb.KubeletServer.
func (s *services) Exec(stream pb.Kubelet_ExecServer) error {
	ep := s.c.Exec
	if ep == nil {
		return unimplemented("exec")
	}
	return session(stream, func(start *pb.StreamStart, attach api.AttachIO) error {
		if len(start.GetCommand()) == 0 {
			return status.Error(codes.InvalidArgument, "Exec: the start message names no command")
		}
		return ep.RunInContainer(stream.Context(), start.GetNamespace(), start.GetPod(), start.GetContainer(), start.GetCommand(), attach)
	})
}

// Attach implements pb.KubeletServer.
func (s *services) Attach(stream pb.Kubelet_AttachServer) error {
	ap := s.c.Attach
	if ap == nil {
		return unimplemented("attach")
	}
	return session(stream, func(start *pb.StreamStart, attach api.AttachIO) error {
		return ap.AttachToContainer(stream.Context(), start.GetNamespace(), start.GetPod(), start.GetContainer(), attach)
	})
}

// sessionStream is the server's side of Exec and Attach.
type sessionStream interface {
	Send(*pb.StreamResponse) error
	Recv() (*pb.StreamRequest, error)
}

// session runs an exec or attach session: run gets the start message and
// the streams; its result becomes the exit message (an exit code) or the
// stream's status (any other error).
func session(stream sessionStream, run func(*pb.StreamStart, api.AttachIO) error) error {
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "the first message of a session must be its start")
	}
	out := &lockedSender{send: stream.Send}
	sio := &sessionIO{tty: start.GetTty()}
	stdinR, stdinW := io.Pipe()
	defer stdinR.Close() // unblocks the receiver if run left input unread
	if start.GetStdin() {
		sio.stdin = stdinR
	}
	if start.GetStdout() {
		sio.stdout = &outWriter{out: out, stream: stdoutStream}
	}
	if start.GetStderr() && !start.GetTty() {
		sio.stderr = &outWriter{out: out, stream: stderrStream}
	}
	if start.GetTty() {
		sio.resize = make(chan api.TermSize, 1)
	}
	go receiveInput(stream, stdinW, sio.resize)

	err = run(start, sio)
	var exit utilexec.ExitError
	switch {
	case err == nil:
		return out.Send(&pb.StreamResponse{Msg: &pb.StreamResponse_Exit{Exit: &pb.Exit{}}})
	case errors.As(err, &exit):
		return out.Send(&pb.StreamResponse{Msg: &pb.StreamResponse_Exit{Exit: &pb.Exit{Code: int32(exit.ExitStatus()), Message: err.Error()}}})
	}
	return wire.ToStatus(err)
}

// receiveInput feeds the client's stdin and resizes to the session until
// the client is done.
func receiveInput(stream sessionStream, stdin *io.PipeWriter, resize chan api.TermSize) {
	for {
		msg, err := stream.Recv()
		if err != nil {
			stdin.Close()
			return
		}
		switch m := msg.GetMsg().(type) {
		case *pb.StreamRequest_Stdin:
			if _, err := stdin.Write(m.Stdin); err != nil {
				return // the session ended without reading it
			}
		case *pb.StreamRequest_StdinEof:
			stdin.Close()
		case *pb.StreamRequest_Resize:
			if resize != nil {
				latestSize(resize, api.TermSize{Width: uint16(m.Resize.GetWidth()), Height: uint16(m.Resize.GetHeight())})
			}
		}
	}
}

// latestSize queues size in place of a size not yet taken: only the newest
// matters to a terminal.
func latestSize(ch chan api.TermSize, size api.TermSize) {
	for {
		select {
		case ch <- size:
			return
		default:
		}
		select {
		case <-ch:
		default:
		}
	}
}

// sessionIO is api.AttachIO over a session's stream.
type sessionIO struct {
	stdin          io.Reader
	stdout, stderr io.WriteCloser
	tty            bool
	resize         chan api.TermSize
}

func (s *sessionIO) Stdin() io.Reader {
	if s.stdin == nil {
		return nil
	}
	return s.stdin
}

func (s *sessionIO) Stdout() io.WriteCloser {
	if s.stdout == nil {
		return nil
	}
	return s.stdout
}

func (s *sessionIO) Stderr() io.WriteCloser {
	if s.stderr == nil {
		return nil
	}
	return s.stderr
}

func (s *sessionIO) TTY() bool { return s.tty }

func (s *sessionIO) Resize() <-chan api.TermSize {
	if s.resize == nil {
		return nil
	}
	return s.resize
}

// lockedSender serialises the sends of a stream written by several
// goroutines (stdout and stderr, for one).
type lockedSender struct {
	mu   sync.Mutex
	send func(*pb.StreamResponse) error
}

func (l *lockedSender) Send(m *pb.StreamResponse) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.send(m)
}

type outStream int

const (
	stdoutStream outStream = iota
	stderrStream
)

// outWriter sends what is written as stdout or stderr messages.
type outWriter struct {
	out    *lockedSender
	stream outStream
}

func (w *outWriter) Write(b []byte) (int, error) {
	return writeChunks(b, func(data []byte) error {
		if w.stream == stderrStream {
			return w.out.Send(&pb.StreamResponse{Msg: &pb.StreamResponse_Stderr{Stderr: data}})
		}
		return w.out.Send(&pb.StreamResponse{Msg: &pb.StreamResponse_Stdout{Stdout: data}})
	})
}

// Close is a no-op: the session's end closes the stream.
func (w *outWriter) Close() error { return nil }
