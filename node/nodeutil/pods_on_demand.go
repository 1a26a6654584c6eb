package nodeutil

import (
	"context"
	"fmt"
	"sync"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// podsOnDemand builds and starts a node's pod controller at its first pod
// (Config.PodControllerOnDemand): an idle node keeps its config, not the
// controller's queues, records and handlers.
type podsOnDemand struct {
	cfg node.PodControllerConfig

	mu sync.Mutex
	// closed: the node stops, no controller is to start.
	closed bool
	// reg is the handler that waits for the first pod, until it came.
	reg cache.ResourceEventHandlerRegistration
	// starting is nil until the first pod came, and closed once the
	// controller's start has ended.
	starting chan struct{}
	// err is why the controller could not start.
	err error
}

// newPodsOnDemand keeps cfg to build the controller later. It asks cfg's
// informers of their factories now, so that Start starts them: a factory
// starts only the informers asked of it before.
func newPodsOnDemand(cfg node.PodControllerConfig) *podsOnDemand {
	cfg.PodInformer.Informer()
	for _, i := range []interface {
		Informer() cache.SharedIndexInformer
	}{
		cfg.ConfigMapInformer, cfg.SecretInformer, cfg.ServiceInformer, cfg.ResourceClaimInformer,
	} {
		if i != nil {
			i.Informer()
		}
	}
	return &podsOnDemand{cfg: cfg}
}

// idle says whether neither Kubernetes nor the provider has a pod of the
// node, once the pod informer's cache has synced: the controller can then
// wait for the first pod. A provider that cannot list its pods is taken to
// have some. ok is false if ctx ended first.
func (n *Node) idle(ctx context.Context) (idle, ok bool) {
	if !cache.WaitForCacheSync(ctx.Done(), n.pods.Informer().HasSynced) {
		return false, false
	}
	if pods, err := n.pods.Lister().List(labels.Everything()); err != nil || len(pods) > 0 {
		return false, true
	}
	pods, err := n.cfg.Capabilities.Pods.GetPods(ctx)
	return err == nil && len(pods) == 0, true
}

// awaitFirstPod starts the pod controller, on a goroutine of its own, once
// the pod informer shows a pod of the node. start is what starts it.
func (n *Node) awaitFirstPod(start func()) error {
	d := n.onDemand
	come := func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		if d.closed || d.starting != nil {
			return
		}
		starting := make(chan struct{})
		d.starting = starting
		go func() {
			defer close(starting)
			start()
		}()
	}
	inf := n.pods.Informer()
	reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { come() },
		UpdateFunc: func(any, any) { come() },
	})
	if err != nil {
		return fmt.Errorf("pod controller: %w", err)
	}
	// A pod already in the cache came as the handler was added: its start
	// has not seen reg, and the handler is not needed any more.
	d.mu.Lock()
	if d.starting == nil {
		d.reg, reg = reg, nil
	}
	d.mu.Unlock()
	if reg != nil {
		_ = inf.RemoveEventHandler(reg)
	}
	return nil
}

// startOnDemand builds and starts the pod controller for the pod that came;
// cancel stops the node, as the controller's failure or end does.
func (n *Node) startOnDemand(ctx context.Context, cancel context.CancelFunc) {
	d := n.onDemand
	d.mu.Lock()
	reg := d.reg
	d.reg = nil
	d.mu.Unlock()
	if reg != nil {
		_ = n.pods.Informer().RemoveEventHandler(reg)
	}
	if _, err := n.startPods(ctx, cancel); err != nil {
		if ctx.Err() == nil { // not cut short by the node's end
			d.mu.Lock()
			d.err = fmt.Errorf("pod controller: %w", err)
			d.mu.Unlock()
			cancel()
		}
		return
	}
	log.G(ctx).Debug("pod controller started for the node's first pod")
}

// startPods starts the pod controller, built now if it waited for the
// node's first pod, and has its end stop the node (cancel). A controller
// built here is kept before it starts: its workers may hand the first pod
// to the provider before Start returns, and PodController must show it by
// then. One that fails to start is done, with its error.
func (n *Node) startPods(ctx context.Context, cancel context.CancelFunc) (*node.PodController, error) {
	pc := n.podController.Load()
	if pc == nil {
		var err error
		if pc, err = node.NewPodController(n.onDemand.cfg); err != nil {
			return nil, err
		}
		n.podController.Store(pc)
	}
	if err := pc.Start(ctx, n.cfg.Workers); err != nil {
		return nil, err
	}
	pc.AfterStop(cancel)
	return pc, nil
}

// close keeps a controller from starting once the node stops, and waits
// for one starting.
func (d *podsOnDemand) close(inf cache.SharedIndexInformer) {
	d.mu.Lock()
	d.closed = true
	reg, starting := d.reg, d.starting
	d.reg = nil
	d.mu.Unlock()
	if reg != nil {
		_ = inf.RemoveEventHandler(reg)
	}
	if starting != nil {
		<-starting
	}
}

// startErr is why the controller could not start, nil if it did or has
// not yet.
func (d *podsOnDemand) startErr() error {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.err
}
