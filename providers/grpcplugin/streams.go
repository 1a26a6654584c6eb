package grpcplugin

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"google.golang.org/grpc"
	utilexec "k8s.io/utils/exec"

	"github.com/vkubelet/virtual-kubelet/node/api"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// inputChunk is the most bytes of stdin or of a port-forward connection
// read into one message.
const inputChunk = 32 << 10

// RunInContainer implements node.ExecProvider.
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	if !p.caps[pb.Capability_CAPABILITY_EXEC] {
		return p.errNotServed("exec")
	}
	start := &pb.StreamStart{Namespace: namespace, Pod: podName, Container: containerName, Command: cmd}
	return runSession(ctx, "Exec", p.kubelet.Exec, start, attach)
}

// AttachToContainer implements node.AttachProvider.
func (p *Provider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	if !p.caps[pb.Capability_CAPABILITY_ATTACH] {
		return p.errNotServed("attach")
	}
	start := &pb.StreamStart{Namespace: namespace, Pod: podName, Container: containerName}
	return runSession(ctx, "Attach", p.kubelet.Attach, start, attach)
}

type sessionClient = grpc.BidiStreamingClient[pb.StreamRequest, pb.StreamResponse]

// runSession carries an exec or attach session over a stream opened by
// open: the client's stdin and terminal sizes one way, stdout, stderr and
// the exit code the other. A non-zero exit code is a utilexec.ExitError.
func runSession(ctx context.Context, call string, open func(context.Context, ...grpc.CallOption) (sessionClient, error), start *pb.StreamStart, attach api.AttachIO) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel() // ends the input goroutines
	stream, err := open(ctx)
	if err != nil {
		return wire.FromStatus(call, err)
	}
	start.Stdin, start.Stdout, start.Stderr, start.Tty = attach.Stdin() != nil, attach.Stdout() != nil, attach.Stderr() != nil, attach.TTY()
	var mu sync.Mutex
	send := func(m *pb.StreamRequest) error {
		mu.Lock()
		defer mu.Unlock()
		return stream.Send(m)
	}
	if err := send(&pb.StreamRequest{Msg: &pb.StreamRequest_Start{Start: start}}); err != nil {
		return wire.FromStatus(call, err)
	}
	if stdin := attach.Stdin(); stdin != nil {
		go sendInput(stdin, func(b []byte) error { return send(&pb.StreamRequest{Msg: &pb.StreamRequest_Stdin{Stdin: b}}) },
			func() { _ = send(&pb.StreamRequest{Msg: &pb.StreamRequest_StdinEof{StdinEof: true}}) })
	}
	if resize := attach.Resize(); resize != nil {
		go func() {
			for {
				select {
				case <-ctx.Done():
					return
				case size, ok := <-resize:
					if !ok || send(&pb.StreamRequest{Msg: &pb.StreamRequest_Resize{Resize: &pb.TermSize{Width: uint32(size.Width), Height: uint32(size.Height)}}}) != nil {
						return
					}
				}
			}
		}()
	}
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return fmt.Errorf("plugin: %s: the session ended without an exit code", call)
		}
		if err != nil {
			return wire.FromStatus(call, err)
		}
		switch m := msg.GetMsg().(type) {
		case *pb.StreamResponse_Stdout:
			write(attach.Stdout(), m.Stdout)
		case *pb.StreamResponse_Stderr:
			write(attach.Stderr(), m.Stderr)
		case *pb.StreamResponse_Exit:
			if code := m.Exit.GetCode(); code != 0 {
				return utilexec.CodeExitError{Err: errors.New(m.Exit.GetMessage()), Code: int(code)}
			}
			return nil
		}
	}
}

// write gives output to the client's stream, if it asked for it. A client
// that went away is noticed by the session's context.
func write(w io.Writer, b []byte) {
	if w != nil {
		_, _ = w.Write(b)
	}
}

// sendInput sends what r reads until it ends, then calls eof (on EOF only).
func sendInput(r io.Reader, send func([]byte) error, eof func()) {
	buf := make([]byte, inputChunk)
	for {
		n, err := r.Read(buf)
		if n > 0 && send(append([]byte(nil), buf[:n]...)) != nil {
			return
		}
		if errors.Is(err, io.EOF) {
			eof()
			return
		}
		if err != nil {
			return
		}
	}
}

// PortForward implements node.PortForwardProvider: one connection, carried
// both ways until either side ends it.
func (p *Provider) PortForward(ctx context.Context, namespace, podName string, port int32, conn io.ReadWriteCloser) error {
	if !p.caps[pb.Capability_CAPABILITY_PORT_FORWARD] {
		return p.errNotServed("port-forward")
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	stream, err := p.kubelet.PortForward(ctx)
	if err != nil {
		return wire.FromStatus("PortForward", err)
	}
	start := &pb.PortForwardStart{Namespace: namespace, Pod: podName, Port: port}
	if err := stream.Send(&pb.PortForwardRequest{Msg: &pb.PortForwardRequest_Start{Start: start}}); err != nil {
		return wire.FromStatus("PortForward", err)
	}
	// Only this goroutine sends from here on.
	go sendInput(conn, func(b []byte) error {
		return stream.Send(&pb.PortForwardRequest{Msg: &pb.PortForwardRequest_Data{Data: b}})
	},
		func() { _ = stream.Send(&pb.PortForwardRequest{Msg: &pb.PortForwardRequest_Close{Close: true}}) })
	for {
		msg, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return wire.FromStatus("PortForward", err)
		}
		if _, err := conn.Write(msg.GetData()); err != nil {
			return err
		}
	}
}
