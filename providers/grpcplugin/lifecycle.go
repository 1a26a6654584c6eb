package grpcplugin

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/volume"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// sendPod makes one of the calls that take a pod.
func (p *Provider) sendPod(ctx context.Context, call string, pod *corev1.Pod, rpc func(context.Context, *pb.PodRequest) error) error {
	data, err := wire.Encode(pod)
	if err != nil {
		return fmt.Errorf("%s: encoding pod %s/%s: %w", call, pod.Namespace, pod.Name, err)
	}
	ctx, cancel := p.call(ctx)
	defer cancel()
	return wire.FromStatus(call, rpc(ctx, &pb.PodRequest{Pod: data}))
}

// CreatePod implements node.PodLifecycleHandler.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	return p.sendPod(ctx, "CreatePod", pod, func(ctx context.Context, r *pb.PodRequest) error {
		_, err := p.lifecycle.CreatePod(ctx, r)
		return err
	})
}

// UpdatePod implements node.PodLifecycleHandler.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	return p.sendPod(ctx, "UpdatePod", pod, func(ctx context.Context, r *pb.PodRequest) error {
		_, err := p.lifecycle.UpdatePod(ctx, r)
		return err
	})
}

// DeletePod implements node.PodLifecycleHandler.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	return p.sendPod(ctx, "DeletePod", pod, func(ctx context.Context, r *pb.PodRequest) error {
		_, err := p.lifecycle.DeletePod(ctx, r)
		return err
	})
}

// GetPod implements node.PodLifecycleHandler.
func (p *Provider) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	ctx, cancel := p.call(ctx)
	defer cancel()
	resp, err := p.lifecycle.GetPod(ctx, &pb.PodRef{Namespace: namespace, Name: name})
	if err != nil {
		return nil, wire.FromStatus("GetPod", err)
	}
	return wire.DecodePod("GetPod answer", resp.GetPod())
}

// GetPodStatus implements node.PodLifecycleHandler.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	ctx, cancel := p.call(ctx)
	defer cancel()
	resp, err := p.lifecycle.GetPodStatus(ctx, &pb.PodRef{Namespace: namespace, Name: name})
	if err != nil {
		return nil, wire.FromStatus("GetPodStatus", err)
	}
	return wire.DecodePodStatus("GetPodStatus answer", resp.GetStatus())
}

// GetPods implements node.PodLifecycleHandler.
func (p *Provider) GetPods(ctx context.Context) ([]*corev1.Pod, error) {
	ctx, cancel := p.call(ctx)
	defer cancel()
	resp, err := p.lifecycle.ListPods(ctx, &pb.ListPodsRequest{})
	if err != nil {
		return nil, wire.FromStatus("ListPods", err)
	}
	pods := make([]*corev1.Pod, 0, len(resp.GetPods()))
	for i, data := range resp.GetPods() {
		pod, err := wire.DecodePod(fmt.Sprintf("ListPods answer, pod %d", i), data)
		if err != nil {
			return nil, err
		}
		pods = append(pods, pod)
	}
	return pods, nil
}

// SetPodVolumes implements node.PodVolumeHandler (used only when the
// plugin declared CAPABILITY_VOLUMES: a plugin that did not does without
// their files, and costs no volume resolution or TokenRequest).
func (p *Provider) SetPodVolumes(ctx context.Context, pod *corev1.Pod, contents *volume.Contents) error {
	if !p.caps[pb.Capability_CAPABILITY_VOLUMES] {
		return p.errNotServed("pod volumes")
	}
	req, err := wire.VolumesToProto(pod, contents)
	if err != nil {
		return fmt.Errorf("SetPodVolumes: encoding pod %s/%s: %w", pod.Namespace, pod.Name, err)
	}
	ctx, cancel := p.call(ctx)
	defer cancel()
	_, err = p.lifecycle.SetPodVolumes(ctx, req)
	return wire.FromStatus("SetPodVolumes", err)
}

// ResizePod implements node.PodResizer (used only when the plugin declared
// CAPABILITY_RESIZE).
func (p *Provider) ResizePod(ctx context.Context, req node.ResizeRequest) (node.ResizeResult, error) {
	in, err := wire.ResizeToProto(req)
	if err != nil {
		return node.ResizeResult{}, fmt.Errorf("ResizePod: encoding pod %s/%s: %w", req.Pod.Namespace, req.Pod.Name, err)
	}
	ctx, cancel := p.call(ctx)
	defer cancel()
	resp, err := p.lifecycle.ResizePod(ctx, in)
	if err != nil {
		return node.ResizeResult{}, wire.FromStatus("ResizePod", err)
	}
	return wire.ResultFromProto(resp)
}

// KillContainer implements node.ContainerKiller (used only when the plugin
// declared CAPABILITY_KILL_CONTAINER). The call may take the grace beyond
// the call timeout.
func (p *Provider) KillContainer(ctx context.Context, namespace, podName, containerName string, grace time.Duration) error {
	ctx, cancel := context.WithTimeout(ctx, p.timeout+grace)
	defer cancel()
	_, err := p.lifecycle.KillContainer(ctx, &pb.KillContainerRequest{Namespace: namespace, Pod: podName, Container: containerName, GraceNanos: int64(grace)})
	return wire.FromStatus("KillContainer", err)
}
