package providerserver

import (
	"io"
	"sync"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// PortForward implements pb.KubeletServer: one connection to one port.
func (s *services) PortForward(stream pb.Kubelet_PortForwardServer) error {
	pp := s.c.PortForward
	if pp == nil {
		return unimplemented("port-forward")
	}
	first, err := stream.Recv()
	if err != nil {
		return err
	}
	start := first.GetStart()
	if start == nil {
		return status.Error(codes.InvalidArgument, "the first message of a port-forward must be its start")
	}
	r, w := io.Pipe()
	go func() {
		for {
			msg, err := stream.Recv()
			if err != nil || msg.GetClose() {
				w.Close()
				return
			}
			if _, err := w.Write(msg.GetData()); err != nil {
				return // the provider closed the connection
			}
		}
	}()
	conn := &forwardConn{r: r, send: stream.Send}
	defer conn.Close()
	return wire.ToStatus(pp.PortForward(stream.Context(), start.GetNamespace(), start.GetPod(), start.GetPort(), conn))
}

// forwardConn is the provider's end of a port-forward connection.
type forwardConn struct {
	r    *io.PipeReader
	mu   sync.Mutex
	send func(*pb.PortForwardResponse) error
}

func (c *forwardConn) Read(b []byte) (int, error) { return c.r.Read(b) }

func (c *forwardConn) Write(b []byte) (int, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	return writeChunks(b, func(data []byte) error { return c.send(&pb.PortForwardResponse{Data: data}) })
}

// Close stops reading; the stream ends when PortForward returns.
func (c *forwardConn) Close() error { return c.r.Close() }
