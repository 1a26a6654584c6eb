package grpcplugin

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"

	"google.golang.org/grpc"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node/api"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// GetContainerLogs implements node.LogsProvider. It returns once the plugin
// opened the log (or refused it), before any line arrives; closing the
// reader ends the stream.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	if !p.caps[pb.Capability_CAPABILITY_LOGS] {
		return nil, p.errNotServed("logs")
	}
	req := &pb.ContainerLogsRequest{
		Namespace: namespace, Pod: podName, Container: containerName,
		Tail: int64(opts.Tail), LimitBytes: int64(opts.LimitBytes), Timestamps: opts.Timestamps,
		Follow: opts.Follow, Previous: opts.Previous, SinceSeconds: int64(opts.SinceSeconds),
	}
	if !opts.SinceTime.IsZero() {
		req.SinceTimeUnixNano = opts.SinceTime.UnixNano()
	}
	ctx, cancel := context.WithCancel(ctx)
	stream, err := p.kubelet.ContainerLogs(ctx, req)
	if err == nil {
		err = opened(stream)
	}
	if err != nil {
		cancel()
		return nil, wire.FromStatus("ContainerLogs", err)
	}
	return &logReader{recv: stream.Recv, cancel: cancel}, nil
}

// opened waits for a stream's header: the plugin's error if it refused the
// stream, which then ends without one.
func opened(stream grpc.ClientStream) error {
	md, err := stream.Header()
	if err != nil {
		return err
	}
	if len(md[wire.OpenedHeader]) > 0 {
		return nil
	}
	if err := stream.RecvMsg(new(pb.ContainerLogsChunk)); err != nil && !errors.Is(err, io.EOF) {
		return err
	}
	return errors.New("the plugin ended the stream without opening it")
}

// logReader reads a ContainerLogs stream.
type logReader struct {
	recv   func() (*pb.ContainerLogsChunk, error)
	cancel context.CancelFunc
	buf    []byte
}

func (r *logReader) Read(b []byte) (int, error) {
	for len(r.buf) == 0 {
		chunk, err := r.recv()
		if errors.Is(err, io.EOF) {
			return 0, io.EOF
		}
		if err != nil {
			return 0, wire.FromStatus("ContainerLogs", err)
		}
		r.buf = chunk.GetData()
	}
	n := copy(b, r.buf)
	r.buf = r.buf[n:]
	return n, nil
}

func (r *logReader) Close() error {
	r.cancel()
	return nil
}

// GetStatsSummary implements node.StatsProvider.
func (p *Provider) GetStatsSummary(ctx context.Context) (*statsv1alpha1.Summary, error) {
	if !p.caps[pb.Capability_CAPABILITY_STATS] {
		return nil, p.errNotServed("stats")
	}
	ctx, cancel := p.call(ctx)
	defer cancel()
	resp, err := p.kubelet.StatsSummary(ctx, &pb.StatsSummaryRequest{})
	if err != nil {
		return nil, wire.FromStatus("StatsSummary", err)
	}
	var summary statsv1alpha1.Summary
	if err := json.Unmarshal(resp.GetSummaryJson(), &summary); err != nil {
		return nil, fmt.Errorf("StatsSummary answer: malformed stats summary JSON (%d bytes): %v", len(resp.GetSummaryJson()), err)
	}
	return &summary, nil
}
