package ha

import (
	"context"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/leaderelection"
	"k8s.io/client-go/tools/leaderelection/resourcelock"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// ServeFunc serves a node until ctx ends, and returns once everything it
// started for the node has stopped. ctx carries the holding's Fence: API
// requests made with it are refused once the fence is down.
type ServeFunc func(ctx context.Context) error

// Hold serves node whenever this replica holds its holder lease, until ctx
// ends. It competes for the lease only while it is the node's preferred
// replica among the live members, and hands the node over (stops serving,
// then releases the lease) when another replica becomes preferred. A serve
// error ends that holding only: the lease is released and the node goes to
// whichever replica is preferred then.
func Hold(ctx context.Context, m *Members, node string, serve ServeFunc) {
	h := &holding{cfg: m.cfg, members: m, node: node, serve: serve}
	ctx = log.WithFields(ctx, map[string]any{"node": node})
	for ctx.Err() == nil {
		if !h.waitPreferred(ctx) {
			return
		}
		h.term(ctx)
		// A pause between terms: a node that fails to serve is not
		// retried in a tight loop.
		select {
		case <-ctx.Done():
		case <-time.After(h.cfg.RetryPeriod):
		}
	}
}

type holding struct {
	cfg     Config
	members *Members
	node    string
	serve   ServeFunc
}

func (h *holding) preferred() bool {
	return Preferred(h.node, h.members.Live()) == h.cfg.Identity
}

// waitPreferred polls, every RetryPeriod, until this replica is the node's
// preferred one; false if ctx ended first.
func (h *holding) waitPreferred(ctx context.Context) bool {
	t := time.NewTicker(h.cfg.RetryPeriod)
	defer t.Stop()
	for !h.preferred() {
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
	}
	return true
}

// term is one try at holding the node: acquire the lease, serve while it is
// held and this replica stays preferred, then stop serving and release it.
// Serving has stopped when term returns.
func (h *holding) term(ctx context.Context) {
	fence := NewFence(h.node, h.cfg.RenewDeadline)
	lock := fencedLock{fence: fence, Interface: &resourcelock.LeaseLock{
		LeaseMeta:  metav1.ObjectMeta{Namespace: h.cfg.Namespace, Name: HolderLeaseName(h.node)},
		Client:     h.cfg.Client.CoordinationV1(),
		LockConfig: resourcelock.ResourceLockConfig{Identity: h.cfg.Identity},
		Labels:     map[string]string{GroupLabel: h.cfg.Group},
	}}
	electorCtx, stopElector := context.WithCancel(ctx)
	defer stopElector()
	s := &serving{served: make(chan struct{})}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            lock,
		Name:            h.node,
		LeaseDuration:   h.cfg.LeaseDuration,
		RenewDeadline:   h.cfg.RenewDeadline,
		RetryPeriod:     h.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			// Not the elector's context: the fence's, which ends before
			// the elector gives up, and which we end ourselves before the
			// elector releases the lease.
			OnStartedLeading: func(context.Context) { s.run(ctx, func() (context.Context, context.CancelFunc) { return fence.Context(electorCtx) }, h.serve) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		log.G(ctx).WithError(err).Error("holder lease election")
		return
	}
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		le.Run(electorCtx)
	}()

	t := time.NewTicker(h.cfg.RetryPeriod)
	defer t.Stop()
	for {
		select {
		case <-elected:
			// The elector could not renew, or saw another holder: the
			// fence is down by now.
			if s.end() {
				log.G(ctx).Warn("lost the node's holder lease: stopped serving the node")
			}
			return
		case <-s.served:
			// Serving ended on its own: release the lease.
		case <-ctx.Done():
		case <-t.C:
			if h.preferred() {
				continue
			}
			log.G(ctx).Info("another replica is preferred for the node now")
		}
		// Stop serving before the lease is released, so that the next
		// holder never overlaps with us.
		if s.end() {
			log.G(ctx).Info("stopped serving the node; releasing its holder lease")
		}
		stopElector()
		<-elected
		return
	}
}

// serving is the one serving of a term, if the lease was acquired.
type serving struct {
	// served is closed when serving ends.
	served chan struct{}

	mu    sync.Mutex
	ended bool
	// cancel ends serving; nil until it starts.
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// run serves with the context start makes, until it ends, unless the term
// has ended already (the elector starts the callback on a goroutine of its
// own, which may run late).
func (s *serving) run(ctx context.Context, start func() (context.Context, context.CancelFunc), serve ServeFunc) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	serveCtx, cancel := start()
	s.cancel = cancel
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	defer close(s.served)
	defer cancel()
	log.G(ctx).Info("holding the node: serving it")
	if err := serve(serveCtx); err != nil && serveCtx.Err() == nil {
		log.G(ctx).WithError(err).Error("serving the node failed; handing it over")
	}
}

// end stops serving, or keeps it from starting, and waits for it to stop;
// it reports whether it had started.
func (s *serving) end() bool {
	s.mu.Lock()
	s.ended = true
	started := s.cancel != nil
	if started {
		s.cancel()
	}
	s.mu.Unlock()
	s.wg.Wait()
	return started
}
