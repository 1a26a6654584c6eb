package node

import (
	"context"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// event is something the control loop acts on. Events of one kind that
// come while the loop is busy are one event, as ticks of a time.Ticker
// are.
type event uint8

const (
	evStop    event = 1 << iota // the context ended
	evDeleted                   // the Node is gone from the API server
	evUpdate                    // the provider reported a new node
	evStale                     // someone else changed a condition of ours
	evPing                      // time to ping the provider
	evRenew                     // time to renew the lease
	evStatus                    // time for the periodic status write
)

// loop runs the control loop's steps one at a time, on a goroutine only
// while there is something to do: an idle node holds timers, not a
// goroutine and its stack, which a process of a thousand nodes feels.
type loop struct {
	mu      sync.Mutex
	pending event
	// running: a goroutine owns the loop's state and will see what is
	// pending before it lets go.
	running bool
	// stopped: the loop ended; events are dropped.
	stopped bool
	// update is the newest node from the provider, for evUpdate.
	update *corev1.Node
}

// post records e (with the provider's node for evUpdate) and, unless a
// goroutine already runs the loop, starts one.
func (n *NodeController) post(e event, update *corev1.Node) {
	l := &n.loop
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		return
	}
	l.pending |= e
	if update != nil {
		l.update = update
	}
	start := !l.running
	l.running = true
	l.mu.Unlock()
	if start {
		go n.drain()
	}
}

// drain runs the loop until nothing is pending, then lets go of it.
func (n *NodeController) drain() {
	l := &n.loop
	for {
		l.mu.Lock()
		e, update := l.pending, l.update
		l.pending, l.update = 0, nil
		if e == 0 {
			l.running = false
			l.mu.Unlock()
			return
		}
		l.mu.Unlock()
		if err := n.step(e, update); err != nil || e&evStop != 0 {
			n.stop(err)
			return
		}
	}
}

// cycle is the loop's state that lives from Start to stop; only the
// goroutine running the loop touches it.
type cycle struct {
	ctx    context.Context
	cancel context.CancelFunc
	// healthy: the provider answered its last ping.
	healthy bool
	// stale: a condition of ours was overwritten and is not written back
	// yet. That waits for a healthy provider, and a failed write is tried
	// again after the next event.
	stale bool
	// release undoes what Start set up, once ctx has ended: the periodic
	// events and the Node watch.
	release []func()
}

// arm has the loop's periodic events posted, and ctx's end stop the
// loop. Without leases the status is the heartbeat, written at the ping
// interval; with them, the lease is renewed at its own interval.
func (n *NodeController) arm(ctx context.Context) {
	c := &n.cycle
	c.healthy = true
	periodic := []tick{{e: evPing, interval: n.pingInterval}}
	if n.leases != nil {
		periodic = append(periodic, tick{e: evRenew, interval: n.renewInterval}, tick{e: evStatus, interval: n.statusInterval})
	}
	c.release = append(c.release, startTicks(func(e event) { n.post(e, nil) }, periodic))
	stopAfter := context.AfterFunc(ctx, func() { n.post(evStop, nil) })
	c.release = append(c.release, func() { stopAfter() })
}

// step handles the events e, update being the provider's newest node for
// evUpdate. An error ends the loop, as Run's result.
func (n *NodeController) step(e event, update *corev1.Node) error {
	c := &n.cycle
	ctx := c.ctx
	if e&evStop != 0 {
		return nil
	}
	if e&evDeleted != 0 {
		if n.existing {
			return fmt.Errorf("node %s: %w", n.name, ErrNodeDeleted)
		}
		log.G(ctx).Warn("node was deleted from the API server; registering it again")
		if err := n.register(ctx); err != nil {
			log.G(ctx).WithError(err).Error("registering the node again")
		}
	}
	if e&evUpdate != 0 && update != nil {
		write := n.writeStatus
		if n.setDesired(ctx, update) {
			write = n.writeNode
		}
		if err := write(ctx); err != nil {
			return err
		}
	}
	if e&evStale != 0 {
		c.stale = true
	}
	if e&evPing != 0 {
		c.healthy = n.ping(ctx)
		if n.leases == nil && c.healthy {
			if err := n.writeStatus(ctx); err != nil {
				return err
			}
		}
	}
	if e&evRenew != 0 && c.healthy {
		n.renewLease(ctx)
	}
	// The periodic write refreshes the conditions' heartbeats: an
	// unhealthy provider gets none, so the node goes NotReady.
	if e&evStatus != 0 && c.healthy {
		if err := n.writeStatus(ctx); err != nil {
			return err
		}
	}
	if c.stale && c.healthy {
		var err error
		if c.stale, err = n.mendStatus(ctx); err != nil {
			return err
		}
	}
	return nil
}

// stop ends the loop: no event is handled after it, the periodic events
// and the Node watch stop, and Done is closed with err as Run's result.
func (n *NodeController) stop(err error) {
	n.loop.mu.Lock()
	n.loop.stopped = true
	n.loop.mu.Unlock()
	c := &n.cycle
	c.cancel()
	for _, release := range c.release {
		release()
	}
	n.run.Finish(err)
}
