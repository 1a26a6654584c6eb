package ha

import (
	"context"
	"sync"
	"time"

	"k8s.io/client-go/tools/leaderelection"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// ServeFunc serves a node until ctx ends, and returns once everything it
// started for the node has stopped. ctx carries the holding's Fence: API
// requests made with it are refused once the fence is down.
type ServeFunc func(ctx context.Context) error

// Hold serves node whenever this replica holds its holder lease, until ctx
// ends. One client-go LeaderElector follows the lease all along, so it
// knows how long the lease has stood still when this replica's turn comes;
// it takes the lease only while this replica is the node's preferred one
// among the live members. When another replica becomes preferred, the node
// is handed over: serving stops, then the lease is released. A serve error
// ends that holding only.
func Hold(ctx context.Context, m *Members, node string, serve ServeFunc) {
	ctx = log.WithFields(ctx, map[string]any{"node": node})
	h := &holding{members: m, node: node}
	h.lock = &holderLock{
		name:       HolderLeaseName(node),
		namespace:  m.cfg.Namespace,
		identity:   m.cfg.Identity,
		labels:     map[string]string{GroupLabel: m.cfg.Group},
		client:     m.cfg.Client.CoordinationV1(),
		cache:      m.leases,
		mayAcquire: h.preferred,
	}
	le, err := leaderelection.NewLeaderElector(leaderelection.LeaderElectionConfig{
		Lock:            h.lock,
		Name:            node,
		LeaseDuration:   m.cfg.LeaseDuration,
		RenewDeadline:   m.cfg.RenewDeadline,
		RetryPeriod:     m.cfg.RetryPeriod,
		ReleaseOnCancel: true,
		Callbacks: leaderelection.LeaderCallbacks{
			// The elector calls this on a goroutine of its own, maybe
			// late: the term it belongs to is in its context.
			OnStartedLeading: func(leading context.Context) { leading.Value(termKey{}).(*serving).run(ctx, serve) },
			OnStoppedLeading: func() {},
		},
	})
	if err != nil {
		log.G(ctx).WithError(err).Error("holder lease election")
		return
	}
	for ctx.Err() == nil {
		h.term(ctx, le)
	}
}

type holding struct {
	members *Members
	node    string
	lock    *holderLock
}

// termKey is the context key of a term's serving.
type termKey struct{}

// preferred reports whether this replica may take the node's lease now.
func (h *holding) preferred() bool {
	return !h.members.Joining() && h.members.Preferred(h.node) == h.members.cfg.Identity
}

// term runs the elector until this replica has held the node and let it
// go: it serves while it holds the lease and stays preferred, then stops
// serving and releases the lease. Serving has stopped when term returns.
func (h *holding) term(ctx context.Context, le *leaderelection.LeaderElector) {
	fence := NewFence(h.node, h.members.cfg.RenewDeadline)
	s := &serving{served: make(chan struct{})}
	h.lock.setTerm(fence, s)
	// Only stopElector ends the elector: were it ended with ctx, it would
	// try to release the lease while serving still runs.
	electorCtx, stopElector := context.WithCancel(context.WithValue(context.WithoutCancel(ctx), termKey{}, s))
	defer stopElector()
	// Not the elector's context: the fence's, which ends before the
	// elector gives up, and which we end ourselves before the elector
	// releases the lease.
	s.start = func() (context.Context, context.CancelFunc) { return fence.Context(electorCtx) }
	elected := make(chan struct{})
	go func() {
		defer close(elected)
		le.Run(electorCtx)
	}()

	t := time.NewTicker(h.members.cfg.RetryPeriod)
	defer t.Stop()
	for {
		select {
		case <-elected:
			// The elector could not renew in time: the fence is down by
			// now, and the lease goes to another replica once it expires
			// (the release was refused while serving ran).
			if s.end() {
				log.G(ctx).Warn("lost the node's holder lease: stopped every provider call and status write for the node")
			}
			return
		case <-s.served:
			// Serving ended on its own: release the lease, and pause so
			// that a node failing to serve is not retried in a tight loop.
			h.handOver(ctx, s, stopElector, elected)
			select {
			case <-ctx.Done():
			case <-time.After(h.members.cfg.RetryPeriod):
			}
			return
		case <-ctx.Done():
			h.handOver(ctx, s, stopElector, elected)
			return
		case <-t.C:
			if !s.hasStarted() || h.preferred() {
				continue
			}
			log.G(ctx).Info("another replica is preferred for the node now: handing it over")
			h.handOver(ctx, s, stopElector, elected)
			return
		}
	}
}

// handOver stops serving, then stops the elector, which releases the lease:
// the next holder never overlaps with this one.
func (h *holding) handOver(ctx context.Context, s *serving, stopElector context.CancelFunc, elected chan struct{}) {
	if s.end() {
		log.G(ctx).Info("stopped serving the node; releasing its holder lease")
	}
	stopElector()
	<-elected
}

// serving is the one serving of a term, if the lease was acquired.
type serving struct {
	// served is closed when serving ends.
	served chan struct{}
	// start makes the context serving runs with.
	start func() (context.Context, context.CancelFunc)

	mu    sync.Mutex
	ended bool
	// cancel ends serving; nil until it starts.
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// run serves until its context ends, unless the term has ended already
// (the elector starts the callback on a goroutine of its own, which may
// run late).
func (s *serving) run(ctx context.Context, serve ServeFunc) {
	s.mu.Lock()
	if s.ended {
		s.mu.Unlock()
		return
	}
	serveCtx, cancel := s.start()
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

// stopped reports whether serving has ended or will not start.
func (s *serving) stopped() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.ended {
		return false
	}
	if s.cancel == nil {
		return true
	}
	select {
	case <-s.served:
		return true
	default:
		return false
	}
}

func (s *serving) hasStarted() bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cancel != nil
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
