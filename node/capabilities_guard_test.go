package node_test

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// backend records which calls reached it.
type backend struct {
	everything
	reached []string
}

func (b *backend) record(method string) error                   { b.reached = append(b.reached, method); return nil }
func (b *backend) CreatePod(context.Context, *corev1.Pod) error { return b.record("CreatePod") }
func (b *backend) UpdatePod(context.Context, *corev1.Pod) error { return b.record("UpdatePod") }
func (b *backend) DeletePod(context.Context, *corev1.Pod) error { return b.record("DeletePod") }
func (b *backend) GetPods(context.Context) ([]*corev1.Pod, error) {
	return nil, b.record("GetPods")
}
func (b *backend) SetPodVolumes(context.Context, *corev1.Pod, *volume.Contents) error {
	return b.record("SetPodVolumes")
}
func (b *backend) ResizePod(context.Context, node.ResizeRequest) (node.ResizeResult, error) {
	return node.ResizeResult{}, b.record("ResizePod")
}
func (b *backend) KillContainer(context.Context, string, string, string, time.Duration) error {
	return b.record("KillContainer")
}
func (b *backend) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return b.record("RunInContainer")
}
func (b *backend) AttachToContainer(context.Context, string, string, string, api.AttachIO) error {
	return b.record("AttachToContainer")
}
func (b *backend) PortForward(context.Context, string, string, int32, io.ReadWriteCloser) error {
	return b.record("PortForward")
}

// mutations makes every call of c that changes what the backend runs, in
// the order of mutating, returning their errors.
func mutations(c node.Capabilities) []error {
	ctx, pod := context.Background(), &corev1.Pod{}
	var errs []error
	for _, call := range []func() error{
		func() error { return c.Pods.CreatePod(ctx, pod) },
		func() error { return c.Pods.UpdatePod(ctx, pod) },
		func() error { return c.Pods.DeletePod(ctx, pod) },
		func() error { return c.Volumes.SetPodVolumes(ctx, pod, &volume.Contents{}) },
		func() error { _, err := c.Resizer.ResizePod(ctx, node.ResizeRequest{Pod: pod}); return err },
		func() error { return c.Killer.KillContainer(ctx, "ns", "p", "c", 0) },
		func() error { return c.Exec.RunInContainer(ctx, "ns", "p", "c", nil, nil) },
		func() error { return c.Attach.AttachToContainer(ctx, "ns", "p", "c", nil) },
		func() error { return c.PortForward.PortForward(ctx, "ns", "p", 80, nil) },
	} {
		errs = append(errs, call())
	}
	return errs
}

var mutating = []string{"CreatePod", "UpdatePod", "DeletePod", "SetPodVolumes", "ResizePod", "KillContainer", "RunInContainer", "AttachToContainer", "PortForward"}

// TestGuardedRefusesBeforeTheBackend: with a guard that refuses, every
// call that changes what the backend runs fails with the guard's error and
// none reaches the backend; reads still do. With a guard that allows,
// every call reaches it.
func TestGuardedRefusesBeforeTheBackend(t *testing.T) {
	refused := errors.New("fence down")
	b := &backend{everything: everything{newTestProvider(), declarer{
		node.CapabilityExec: true, node.CapabilityAttach: true, node.CapabilityPortForward: true,
		node.CapabilityKillContainer: true, node.CapabilityResize: true, node.CapabilityVolumes: true,
	}}}
	var asked []string
	c := node.CapabilitiesOf(b).Guarded(func(_ context.Context, method string) error {
		asked = append(asked, method)
		return refused
	})
	for i, err := range mutations(c) {
		if !errors.Is(err, refused) {
			t.Errorf("%s: %v, want the guard's refusal", mutating[i], err)
		}
	}
	if len(b.reached) != 0 {
		t.Errorf("refused calls reached the backend: %v", b.reached)
	}
	if !slices.Equal(asked, mutating) {
		t.Errorf("the guard was asked %v, want %v", asked, mutating)
	}
	if _, err := c.Pods.GetPods(context.Background()); err != nil || !slices.Equal(b.reached, []string{"GetPods"}) {
		t.Errorf("a read was refused: %v, reached %v", err, b.reached)
	}

	b.reached = nil
	allowed := node.CapabilitiesOf(b).Guarded(func(context.Context, string) error { return nil })
	for i, err := range mutations(allowed) {
		if err != nil {
			t.Errorf("%s allowed: %v", mutating[i], err)
		}
	}
	if !slices.Equal(b.reached, mutating) {
		t.Errorf("allowed calls reached the backend as %v, want %v", b.reached, mutating)
	}
}

// TestGuardedKeepsAbsentCapabilitiesAbsent: guarding adds no capability.
func TestGuardedKeepsAbsentCapabilitiesAbsent(t *testing.T) {
	c := node.CapabilitiesOf(newTestProvider()).Guarded(func(context.Context, string) error { return nil })
	for name, present := range capabilityFields(c) {
		if present != (name == "Pods") {
			t.Errorf("a bare provider, guarded, has %s: %t", name, present)
		}
	}
}
