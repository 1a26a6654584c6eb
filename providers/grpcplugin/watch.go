package grpcplugin

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

const (
	// The wait before subscribing again to a stream that ended, doubling
	// up to the maximum while the plugin stays away.
	minResubscribe = 100 * time.Millisecond
	maxResubscribe = 2 * time.Second
	// pollInterval is how often the pods of a plugin that does not push
	// their status are listed.
	pollInterval = 5 * time.Second
)

// NotifyPods implements node.PodNotifier: the plugin's WatchPods stream,
// subscribed again whenever it ends, until ctx ends. A plugin without
// CAPABILITY_POD_NOTIFIER is polled with ListPods instead.
func (p *Provider) NotifyPods(ctx context.Context, f func(*corev1.Pod)) {
	if !p.caps[pb.Capability_CAPABILITY_POD_NOTIFIER] {
		go p.pollPods(ctx, f)
		return
	}
	go resubscribe(ctx, "WatchPods", func(ctx context.Context) (bool, error) {
		stream, err := p.lifecycle.WatchPods(ctx, &pb.WatchPodsRequest{})
		if err != nil {
			return false, err
		}
		return receive(ctx, p, func() ([]byte, error) {
			ev, err := stream.Recv()
			return ev.GetPod(), err
		}, func(data []byte) error {
			pod, err := wire.DecodePod("WatchPods event", data)
			if err == nil {
				f(pod)
			}
			return err
		})
	})
}

// pollPods reports every pod of the plugin each pollInterval.
func (p *Provider) pollPods(ctx context.Context, f func(*corev1.Pod)) {
	t := time.NewTicker(pollInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pods, err := p.GetPods(ctx)
		if err != nil {
			log.G(ctx).WithError(err).Warnf("listing the pods of %s", p)
			continue
		}
		for _, pod := range pods {
			f(pod)
		}
	}
}

// Ping implements node.NodeProvider: the plugin not answering is a
// provider outage.
func (p *Provider) Ping(ctx context.Context) error {
	ctx, cancel := p.call(ctx)
	defer cancel()
	_, err := p.nodes.Ping(ctx, &pb.PingRequest{})
	return wire.FromStatus("Ping", err)
}

// NotifyNodeStatus implements node.NodeProvider with the plugin's WatchNode
// stream, when it declared one; else, for a plugin that declared
// capacity changes, the node it registered with each new capacity.
func (p *Provider) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	if !p.caps[pb.Capability_CAPABILITY_NODE_STATUS] {
		if p.caps[pb.Capability_CAPABILITY_CAPACITY] {
			p.notifyCapacity(ctx, cb)
		}
		return
	}
	go resubscribe(ctx, "WatchNode", func(ctx context.Context) (bool, error) {
		stream, err := p.nodes.WatchNode(ctx, &pb.WatchNodeRequest{})
		if err != nil {
			return false, err
		}
		return receive(ctx, p, func() ([]byte, error) {
			ev, err := stream.Recv()
			return ev.GetNode(), err
		}, func(data []byte) error {
			n, err := wire.Decode[corev1.Node]("WatchNode event", data)
			if err == nil {
				cb(n)
			}
			return err
		})
	})
}

// receive hands what recv returns to deliver until recv fails, and says
// whether anything came. An event deliver cannot decode is logged and
// skipped: one bad event does not end the stream.
func receive[E any](ctx context.Context, p *Provider, recv func() (E, error), deliver func(E) error) (bool, error) {
	received := false
	for {
		data, err := recv()
		if err != nil {
			return received, err
		}
		received = true
		if err := deliver(data); err != nil {
			log.G(ctx).WithError(err).Errorf("%s sent a bad event; skipped", p)
		}
	}
}

// resubscribe runs a stream until ctx ends: each time it ends, run is
// called again after a wait that doubles while run receives nothing (the
// plugin is away) and starts over once it does.
func resubscribe(ctx context.Context, what string, run func(context.Context) (received bool, err error)) {
	wait := minResubscribe
	for {
		received, err := run(ctx)
		if ctx.Err() != nil {
			return
		}
		if received {
			wait = minResubscribe
		}
		log.G(ctx).WithError(wire.FromStatus(what, err)).Warnf("plugin stream %s ended; subscribing again in %s", what, wait)
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, maxResubscribe)
	}
}

// notifyCapacity reports the registered node with each capacity of the
// plugin's WatchCapacity stream (allocatable the same).
func (p *Provider) notifyCapacity(ctx context.Context, cb func(*corev1.Node)) {
	go resubscribe(ctx, "WatchCapacity", func(ctx context.Context) (bool, error) {
		stream, err := p.nodes.WatchCapacity(ctx, &pb.WatchCapacityRequest{})
		if err != nil {
			return false, err
		}
		return receive(ctx, p, func() (map[string]string, error) {
			ev, err := stream.Recv()
			return ev.GetCapacity(), err
		}, func(data map[string]string) error {
			capacity, err := wire.DecodeResources("WatchCapacity event", data)
			if err == nil {
				n := p.node.DeepCopy()
				n.Status.Capacity, n.Status.Allocatable = capacity, capacity.DeepCopy()
				cb(n)
			}
			return err
		})
	})
}
