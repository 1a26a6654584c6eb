package grpcplugin_test

import (
	"context"
	"path/filepath"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// delegating is a provider behind the plugin boundary that has the pod
// controller run its probes (its pod network reachable), kills containers
// and resizes pods as scripted, recording the calls.
type delegating struct {
	node.Provider
	mu      sync.Mutex // the server's goroutines record, the test reads
	result  node.ResizeResult
	resized []node.ResizeRequest
	killed  []string
}

func (*delegating) PodNetworkReachable() bool { return true }

func (d *delegating) KillContainer(_ context.Context, namespace, pod, container string, grace time.Duration) error {
	if container == "missing" {
		return errdefs.NotFoundf("container %s not found", container)
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.killed = append(d.killed, namespace+"/"+pod+"/"+container+" "+grace.String())
	return nil
}

func (d *delegating) ResizePod(_ context.Context, req node.ResizeRequest) (node.ResizeResult, error) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.resized = append(d.resized, req)
	return d.result, nil
}

// calls are the resizes and kills the provider got.
func (d *delegating) calls() ([]node.ResizeRequest, []string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	return append([]node.ResizeRequest(nil), d.resized...), append([]string(nil), d.killed...)
}

// TestProbeAndResizeCapabilities: a provider delegating its probes,
// killing containers and resizing pods declares so through the handshake,
// and its KillContainer and ResizePod are reached with their arguments and
// answer with their typed results; a provider without them declares none.
func TestProbeAndResizeCapabilities(t *testing.T) {
	dir := socketDir(t)
	sock := filepath.Join(dir, "p.sock")
	d := &delegating{Provider: newMock(t, dir, ""), result: node.ResizeResult{Outcome: node.ResizeDeferred, Message: "short of CPU"}}
	servePlugin(t, sock, d)
	p := dial(t, dir, sock)
	for _, c := range []node.Capability{node.CapabilityProbes, node.CapabilityKillContainer, node.CapabilityResize} {
		if !p.(node.CapabilityDeclarer).Declares(c) {
			t.Errorf("%s not declared", c)
		}
	}
	if !p.(node.ProbeDelegator).PodNetworkReachable() {
		t.Error("the plugin's pod network reachability did not cross")
	}

	ctx := context.Background()
	if err := p.(node.ContainerKiller).KillContainer(ctx, "ns", "web", "app", 3*time.Second); err != nil {
		t.Fatal(err)
	}
	if _, killed := d.calls(); len(killed) != 1 || killed[0] != "ns/web/app 3s" {
		t.Errorf("KillContainer reached the provider as %v", killed)
	}
	if err := p.(node.ContainerKiller).KillContainer(ctx, "ns", "web", "missing", 0); !errdefs.IsNotFound(err) {
		t.Errorf("KillContainer of a missing container: %v, want NotFound", err)
	}

	cpu := func(q string) corev1.ResourceRequirements {
		return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(q)}}
	}
	req := node.ResizeRequest{
		Pod:        &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web"}},
		Containers: []node.ContainerResize{{Name: "app", From: cpu("100m"), To: cpu("200m"), Restart: true}},
		PodLevel:   &node.PodLevelResize{From: corev1.ResourceRequirements{}, To: cpu("1")},
	}
	res, err := p.(node.PodResizer).ResizePod(ctx, req)
	if err != nil || res != d.result {
		t.Errorf("ResizePod = %+v, %v; want %+v", res, err, d.result)
	}
	resized, _ := d.calls()
	if len(resized) != 1 {
		t.Fatalf("ResizePod reached the provider %d times", len(resized))
	}
	got := resized[0]
	if got.Pod.Name != "web" || !apiequality.Semantic.DeepEqual(got.Containers, req.Containers) || !apiequality.Semantic.DeepEqual(got.PodLevel, req.PodLevel) {
		t.Errorf("ResizePod reached the provider as %+v", got)
	}

	plainSock := filepath.Join(dir, "plain.sock")
	servePlugin(t, plainSock, struct{ node.Provider }{newMock(t, dir, "")})
	plain := dial(t, dir, plainSock)
	for _, c := range []node.Capability{node.CapabilityProbes, node.CapabilityKillContainer, node.CapabilityResize} {
		if plain.(node.CapabilityDeclarer).Declares(c) {
			t.Errorf("a plain provider declares %s", c)
		}
	}
}
