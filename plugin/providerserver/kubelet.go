package providerserver

import (
	"context"
	"errors"
	"io"
	"time"

	jsonv2 "github.com/go-json-experiment/json"
	"github.com/go-json-experiment/json/jsontext"
	jsonv1 "github.com/go-json-experiment/json/v1"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node/api"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// chunkSize is the most bytes one stream message carries.
const chunkSize = 32 << 10

func unimplemented(what string) error {
	return status.Errorf(codes.Unimplemented, "this plugin does not serve %s", what)
}

// ContainerLogs implements pb.KubeletServer. Once the provider has opened
// the log, the stream's header is sent, so the daemon tells "no such
// container" from "no line yet" without waiting for data.
func (s *services) ContainerLogs(req *pb.ContainerLogsRequest, stream pb.Kubelet_ContainerLogsServer) error {
	lp := s.c.Logs
	if lp == nil {
		return unimplemented("logs")
	}
	opts := api.ContainerLogOpts{
		Tail: int(req.GetTail()), LimitBytes: int(req.GetLimitBytes()), Timestamps: req.GetTimestamps(),
		Follow: req.GetFollow(), Previous: req.GetPrevious(), SinceSeconds: int(req.GetSinceSeconds()),
	}
	if t := req.GetSinceTimeUnixNano(); t != 0 {
		opts.SinceTime = time.Unix(0, t)
	}
	ctx := stream.Context()
	r, err := lp.GetContainerLogs(ctx, req.GetNamespace(), req.GetPod(), req.GetContainer(), opts)
	if err != nil {
		return wire.ToStatus(err)
	}
	defer r.Close()
	if err := stream.SendHeader(metadata.Pairs(wire.OpenedHeader, "true")); err != nil {
		return err
	}
	return copyChunks(r, func(b []byte) error { return stream.Send(&pb.ContainerLogsChunk{Data: b}) })
}

// copyChunks sends what r reads, chunkSize at most per message, until EOF.
func copyChunks(r io.Reader, send func([]byte) error) error {
	buf := make([]byte, chunkSize)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, serr := writeChunks(buf[:n], send); serr != nil {
				return serr
			}
		}
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return wire.ToStatus(err)
		}
	}
}

// writeChunks sends b in messages of chunkSize bytes at most, each its own
// copy (gRPC may hold a message after Send returns).
func writeChunks(b []byte, send func([]byte) error) (int, error) {
	for sent := 0; sent < len(b); {
		n := min(len(b)-sent, chunkSize)
		if err := send(append([]byte(nil), b[sent:sent+n]...)); err != nil {
			return sent, err
		}
		sent += n
	}
	return len(b), nil
}

// StatsSummary implements pb.KubeletServer.
func (s *services) StatsSummary(ctx context.Context, _ *pb.StatsSummaryRequest) (*pb.StatsSummaryResponse, error) {
	sp := s.c.Stats
	if sp == nil {
		return nil, unimplemented("stats")
	}
	summary, err := sp.GetStatsSummary(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	data, err := marshalSummary(summary)
	return &pb.StatsSummaryResponse{SummaryJson: data}, wire.ToStatus(err)
}

// marshalSummary writes the kubelet's Summary JSON with its times to the
// nanosecond. metav1.Time alone writes whole seconds, and metrics-server
// divides a counter's change by its time's: a counter sampled at 12.7 s but
// stamped 12 s is off by up to a second over its scrape interval. RFC 3339
// allows the fraction, and every reader of the kubelet's format parses it.
func marshalSummary(summary *statsv1alpha1.Summary) ([]byte, error) {
	return jsonv2.Marshal(summary, summaryOptions)
}

// summaryOptions are encoding/json's behaviour with metav1.Time to the
// nanosecond, built once.
var summaryOptions = jsonv2.JoinOptions(jsonv1.DefaultOptionsV1(), jsonv2.WithMarshalers(
	jsonv2.MarshalToFunc(func(enc *jsontext.Encoder, t metav1.Time) error {
		if t.IsZero() {
			return enc.WriteToken(jsontext.Null)
		}
		return enc.WriteToken(jsontext.String(t.UTC().Format(time.RFC3339Nano)))
	})))
