package providerserver

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// Handshake answers the protocol version and the capabilities; a daemon
// speaking another version is refused.
func (s *services) Handshake(_ context.Context, req *pb.HandshakeRequest) (*pb.HandshakeResponse, error) {
	if req.GetProtocolVersion() != wire.ProtocolVersion {
		return nil, status.Errorf(codes.FailedPrecondition, "the daemon speaks plugin protocol version %d, this plugin speaks %d", req.GetProtocolVersion(), wire.ProtocolVersion)
	}
	resp := &pb.HandshakeResponse{ProtocolVersion: wire.ProtocolVersion, Capabilities: s.caps, Name: fmt.Sprint(s.p),
		RuntimeFeatures: &pb.RuntimeFeatures{UserNamespaces: s.c.Runtime.UserNamespaces, RecursiveReadOnlyMounts: s.c.Runtime.RecursiveReadOnlyMounts}}
	if d := s.c.Probes; d != nil {
		resp.PodNetworkReachable = d.PodNetworkReachable()
	}
	return resp, nil
}

// podArg decodes the pod of a request; bad bytes are the daemon's invalid
// input.
func podArg(call string, data []byte) (*corev1.Pod, error) {
	pod, err := wire.DecodePod(call+" request", data)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	return pod, nil
}

// notFound is the answer for a pod the provider returned nil for.
func notFound(ref *pb.PodRef) error {
	return status.Errorf(codes.NotFound, "pod %s/%s not found", ref.GetNamespace(), ref.GetName())
}

// CreatePod implements pb.LifecycleServer.
func (s *services) CreatePod(ctx context.Context, req *pb.PodRequest) (*pb.PodResponse, error) {
	pod, err := podArg("CreatePod", req.GetPod())
	if err != nil {
		return nil, err
	}
	return &pb.PodResponse{}, wire.ToStatus(s.p.CreatePod(ctx, pod))
}

// UpdatePod implements pb.LifecycleServer.
func (s *services) UpdatePod(ctx context.Context, req *pb.PodRequest) (*pb.PodResponse, error) {
	pod, err := podArg("UpdatePod", req.GetPod())
	if err != nil {
		return nil, err
	}
	return &pb.PodResponse{}, wire.ToStatus(s.p.UpdatePod(ctx, pod))
}

// DeletePod implements pb.LifecycleServer.
func (s *services) DeletePod(ctx context.Context, req *pb.PodRequest) (*pb.PodResponse, error) {
	pod, err := podArg("DeletePod", req.GetPod())
	if err != nil {
		return nil, err
	}
	return &pb.PodResponse{}, wire.ToStatus(s.p.DeletePod(ctx, pod))
}

// GetPod implements pb.LifecycleServer.
func (s *services) GetPod(ctx context.Context, req *pb.PodRef) (*pb.GetPodResponse, error) {
	pod, err := s.p.GetPod(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	if pod == nil {
		return nil, notFound(req)
	}
	data, err := wire.Encode(pod)
	return &pb.GetPodResponse{Pod: data}, wire.ToStatus(err)
}

// GetPodStatus implements pb.LifecycleServer.
func (s *services) GetPodStatus(ctx context.Context, req *pb.PodRef) (*pb.GetPodStatusResponse, error) {
	st, err := s.p.GetPodStatus(ctx, req.GetNamespace(), req.GetName())
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	if st == nil {
		return nil, notFound(req)
	}
	data, err := wire.Encode(st)
	return &pb.GetPodStatusResponse{Status: data}, wire.ToStatus(err)
}

// ListPods implements pb.LifecycleServer.
func (s *services) ListPods(ctx context.Context, _ *pb.ListPodsRequest) (*pb.ListPodsResponse, error) {
	pods, err := s.p.GetPods(ctx)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	resp := &pb.ListPodsResponse{Pods: make([][]byte, 0, len(pods))}
	for _, pod := range pods {
		if pod == nil {
			continue
		}
		data, err := wire.Encode(pod)
		if err != nil {
			return nil, wire.ToStatus(err)
		}
		resp.Pods = append(resp.Pods, data)
	}
	return resp, nil
}

// SetPodVolumes implements pb.LifecycleServer.
func (s *services) SetPodVolumes(ctx context.Context, req *pb.SetPodVolumesRequest) (*pb.SetPodVolumesResponse, error) {
	h := s.c.Volumes
	if h == nil {
		return nil, status.Error(codes.Unimplemented, "this plugin does not take pod volumes")
	}
	pod, err := podArg("SetPodVolumes", req.GetPod())
	if err != nil {
		return nil, err
	}
	return &pb.SetPodVolumesResponse{}, wire.ToStatus(h.SetPodVolumes(ctx, pod, wire.VolumesFromProto(req)))
}

// ResizePod implements pb.LifecycleServer for a node.PodResizer.
func (s *services) ResizePod(ctx context.Context, in *pb.ResizePodRequest) (*pb.ResizePodResponse, error) {
	r := s.c.Resizer
	if r == nil {
		return nil, status.Error(codes.Unimplemented, "the provider does not resize pods in place")
	}
	req, err := wire.ResizeFromProto(in)
	if err != nil {
		return nil, status.Error(codes.InvalidArgument, err.Error())
	}
	result, err := r.ResizePod(ctx, req)
	if err != nil {
		return nil, wire.ToStatus(err)
	}
	resp, err := wire.ResultToProto(result)
	if err != nil {
		return nil, status.Error(codes.Internal, err.Error())
	}
	return resp, nil
}

// KillContainer implements pb.LifecycleServer for a node.ContainerKiller.
func (s *services) KillContainer(ctx context.Context, in *pb.KillContainerRequest) (*pb.KillContainerResponse, error) {
	k := s.c.Killer
	if k == nil {
		return nil, status.Error(codes.Unimplemented, "the provider does not kill containers")
	}
	if in.GetNamespace() == "" || in.GetPod() == "" || in.GetContainer() == "" || in.GetGraceNanos() < 0 {
		return nil, status.Errorf(codes.InvalidArgument, "KillContainer request: namespace %q, pod %q, container %q and grace %d: all must be set, grace not negative",
			in.GetNamespace(), in.GetPod(), in.GetContainer(), in.GetGraceNanos())
	}
	err := k.KillContainer(ctx, in.GetNamespace(), in.GetPod(), in.GetContainer(), time.Duration(in.GetGraceNanos()))
	return &pb.KillContainerResponse{}, wire.ToStatus(err)
}
