package grpcplugin_test

import (
	"context"
	"net"
	"path/filepath"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"google.golang.org/grpc"

	"github.com/vkubelet/virtual-kubelet/node"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/grpcplugin"
)

// garbagePlugin answers the contract with bytes that are not what it says.
type garbagePlugin struct {
	pb.UnimplementedPluginServer
	pb.UnimplementedLifecycleServer
	pb.UnimplementedNodeServer
	pb.UnimplementedKubeletServer
	version uint32
	node    []byte
}

var garbage = []byte{0xff, 0xfe, 0x01, 0x02, 0x03}

func encoded(t *testing.T, obj interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	data, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return data
}

func (g *garbagePlugin) Handshake(context.Context, *pb.HandshakeRequest) (*pb.HandshakeResponse, error) {
	return &pb.HandshakeResponse{ProtocolVersion: g.version, Name: "garbage", Capabilities: []pb.Capability{
		pb.Capability_CAPABILITY_POD_NOTIFIER, pb.Capability_CAPABILITY_STATS, pb.Capability(99),
	}}, nil
}

func (g *garbagePlugin) GetNode(context.Context, *pb.GetNodeRequest) (*pb.GetNodeResponse, error) {
	return &pb.GetNodeResponse{Node: g.node}, nil
}

func (g *garbagePlugin) GetPod(context.Context, *pb.PodRef) (*pb.GetPodResponse, error) {
	return &pb.GetPodResponse{Pod: garbage}, nil
}

func (g *garbagePlugin) GetPodStatus(context.Context, *pb.PodRef) (*pb.GetPodStatusResponse, error) {
	data, err := (&corev1.PodStatus{Phase: "Exploded"}).Marshal()
	return &pb.GetPodStatusResponse{Status: data}, err
}

func (g *garbagePlugin) ListPods(context.Context, *pb.ListPodsRequest) (*pb.ListPodsResponse, error) {
	data, err := (&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fine"}}).Marshal()
	return &pb.ListPodsResponse{Pods: [][]byte{data, garbage}}, err
}

func (g *garbagePlugin) WatchPods(_ *pb.WatchPodsRequest, stream pb.Lifecycle_WatchPodsServer) error {
	good, err := (&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "fine"}}).Marshal()
	if err != nil {
		return err
	}
	for _, data := range [][]byte{garbage, nil, good} {
		if err := stream.Send(&pb.PodEvent{Pod: data}); err != nil {
			return err
		}
	}
	<-stream.Context().Done()
	return nil
}

func (g *garbagePlugin) StatsSummary(context.Context, *pb.StatsSummaryRequest) (*pb.StatsSummaryResponse, error) {
	return &pb.StatsSummaryResponse{SummaryJson: []byte("{not json")}, nil
}

func serveGarbage(t *testing.T, g *garbagePlugin) (dir, sock string) {
	t.Helper()
	dir = socketDir(t)
	sock = filepath.Join(dir, "g.sock")
	lis, err := net.Listen("unix", sock)
	if err != nil {
		t.Fatal(err)
	}
	srv := grpc.NewServer()
	pb.RegisterPluginServer(srv, g)
	pb.RegisterLifecycleServer(srv, g)
	pb.RegisterNodeServer(srv, g)
	pb.RegisterKubeletServer(srv, g)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return dir, sock
}

func newGrpc(t *testing.T, dir, sock string) (node.Provider, error) {
	t.Helper()
	cfg := filepath.Join(dir, "grpc.yaml")
	writeFile(t, cfg, "endpoint: unix://"+sock+"\nconnectTimeout: 10s\n")
	return grpcplugin.New(context.Background(), provider.InitConfig{ConfigPath: cfg, NodeName: "vk0"})
}

// TestGarbageFromPlugin: a plugin answering garbage gets errors naming the
// call and what is wrong, never a panic; the events that are fine still
// arrive.
func TestGarbageFromPlugin(t *testing.T) {
	goodNode := encoded(t, &corev1.Node{})
	for _, tc := range []struct {
		name    string
		plugin  *garbagePlugin
		wantErr string
	}{
		{"wrong version", &garbagePlugin{version: 2, node: goodNode}, "speaks protocol version 2; this daemon speaks 1"},
		{"malformed node", &garbagePlugin{version: 1, node: garbage}, "GetNode answer: malformed *v1.Node"},
		{"empty node", &garbagePlugin{version: 1}, "GetNode answer: empty"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir, sock := serveGarbage(t, tc.plugin)
			if _, err := newGrpc(t, dir, sock); err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New: %v, want an error with %q", err, tc.wantErr)
			}
		})
	}

	dir, sock := serveGarbage(t, &garbagePlugin{version: 1, node: goodNode})
	p, err := newGrpc(t, dir, sock)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	for what, err := range map[string]error{
		"GetPod answer: malformed *v1.Pod":              func() error { _, err := p.GetPod(ctx, "ns", "x"); return err }(),
		`GetPodStatus answer: unknown phase "Exploded"`: func() error { _, err := p.GetPodStatus(ctx, "ns", "x"); return err }(),
		"ListPods answer, pod 1: malformed *v1.Pod":     func() error { _, err := p.GetPods(ctx); return err }(),
		"StatsSummary answer: malformed stats summary JSON": func() error {
			_, err := p.(node.StatsProvider).GetStatsSummary(ctx)
			return err
		}(),
		"does not serve exec": p.(node.ExecProvider).RunInContainer(ctx, "ns", "x", "c", []string{"true"}, &attachIO{}),
	} {
		if err == nil || !strings.Contains(err.Error(), what) {
			t.Errorf("got %v, want an error with %q", err, what)
		}
	}
	seen := watch(ctx, p)
	seen.waitPhase(t, "fine", "")
}
