package node

import (
	"context"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// CallGuard is asked before a call that changes what the provider runs,
// with the call's context and the method's name; an error refuses the
// call, which then fails with it without reaching the provider.
type CallGuard func(ctx context.Context, method string) error

// then runs call unless guard refuses method.
func (guard CallGuard) then(ctx context.Context, method string, call func() error) error {
	if err := guard(ctx, method); err != nil {
		return err
	}
	return call()
}

// Guarded returns c with every call that changes what the provider runs
// asked of guard first: CreatePod, UpdatePod, DeletePod, SetPodVolumes,
// ResizePod, PrepareDevices, KillContainer, RunInContainer (exec, exec probes included),
// AttachToContainer and PortForward. Reads (GetPod, GetPods, logs, stats,
// the node's status) are not guarded. A replica fences its nodes' provider
// this way: one that lost a node's lease sends nothing more for it.
func (c Capabilities) Guarded(guard CallGuard) Capabilities {
	c.Pods = guardedPods{c.Pods, guard}
	if c.Volumes != nil {
		c.Volumes = guardedVolumes{c.Volumes, guard}
	}
	if c.Resizer != nil {
		c.Resizer = guardedResizer{c.Resizer, guard}
	}
	if c.Killer != nil {
		c.Killer = guardedKiller{c.Killer, guard}
	}
	if c.Devices != nil {
		c.Devices = guardedDevices{c.Devices, guard}
	}
	if c.Exec != nil {
		c.Exec = guardedExec{c.Exec, guard}
	}
	if c.Attach != nil {
		c.Attach = guardedAttach{c.Attach, guard}
	}
	if c.PortForward != nil {
		c.PortForward = guardedPortForward{c.PortForward, guard}
	}
	return c
}

type guardedPods struct {
	PodLifecycleHandler
	guard CallGuard
}

func (g guardedPods) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	return g.guard.then(ctx, "CreatePod", func() error { return g.PodLifecycleHandler.CreatePod(ctx, pod) })
}

func (g guardedPods) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	return g.guard.then(ctx, "UpdatePod", func() error { return g.PodLifecycleHandler.UpdatePod(ctx, pod) })
}

func (g guardedPods) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	return g.guard.then(ctx, "DeletePod", func() error { return g.PodLifecycleHandler.DeletePod(ctx, pod) })
}

type guardedVolumes struct {
	next  PodVolumeHandler
	guard CallGuard
}

func (g guardedVolumes) SetPodVolumes(ctx context.Context, pod *corev1.Pod, contents *volume.Contents) error {
	return g.guard.then(ctx, "SetPodVolumes", func() error { return g.next.SetPodVolumes(ctx, pod, contents) })
}

type guardedResizer struct {
	next  PodResizer
	guard CallGuard
}

func (g guardedResizer) ResizePod(ctx context.Context, req ResizeRequest) (ResizeResult, error) {
	if err := g.guard(ctx, "ResizePod"); err != nil {
		return ResizeResult{}, err
	}
	return g.next.ResizePod(ctx, req)
}

type guardedKiller struct {
	next  ContainerKiller
	guard CallGuard
}

func (g guardedKiller) KillContainer(ctx context.Context, namespace, podName, containerName string, grace time.Duration) error {
	return g.guard.then(ctx, "KillContainer", func() error { return g.next.KillContainer(ctx, namespace, podName, containerName, grace) })
}

type guardedExec struct {
	next  ExecProvider
	guard CallGuard
}

func (g guardedExec) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	return g.guard.then(ctx, "RunInContainer", func() error { return g.next.RunInContainer(ctx, namespace, podName, containerName, cmd, attach) })
}

type guardedAttach struct {
	next  AttachProvider
	guard CallGuard
}

func (g guardedAttach) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	return g.guard.then(ctx, "AttachToContainer", func() error { return g.next.AttachToContainer(ctx, namespace, podName, containerName, attach) })
}

type guardedPortForward struct {
	next  PortForwardProvider
	guard CallGuard
}

func (g guardedPortForward) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	return g.guard.then(ctx, "PortForward", func() error { return g.next.PortForward(ctx, namespace, podName, port, stream) })
}

type guardedDevices struct {
	DeviceProvider
	guard CallGuard
}

func (g guardedDevices) PrepareDevices(ctx context.Context, pod *corev1.Pod, devices PodDevices) error {
	if err := g.guard(ctx, "PrepareDevices"); err != nil {
		return err
	}
	return g.DeviceProvider.PrepareDevices(ctx, pod, devices)
}
