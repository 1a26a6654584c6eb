package ha

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	coordinationv1client "k8s.io/client-go/kubernetes/typed/coordination/v1"
	coordinationv1listers "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

// errNotPreferred refuses to take a node's lease: another live replica is
// the node's preferred one.
var errNotPreferred = errors.New("not the node's preferred replica")

// errStillServing refuses to release a node's lease before serving it has
// stopped: after a failed renewal client-go releases at once, and the lease
// is then left to expire.
var errStillServing = errors.New("still serving the node")

// holderLock is the resourcelock.Interface of a node's holder lease, as
// client-go's LeaseLock but for three things. A candidate reads the lease
// from the replica's informer, so that every replica follows every node's
// lease, and knows how long it has stood still, at no cost to the API
// server; the holder reads it from the API server, to renew and release
// on the newest copy. It takes the lease only while mayAcquire says so,
// and releases it only once the term's serving has stopped. And each write
// raises or drops the term's Fence.
type holderLock struct {
	name, namespace, identity string
	labels                    map[string]string
	client                    coordinationv1client.LeasesGetter
	cache                     coordinationv1listers.LeaseNamespaceLister
	mayAcquire                func() bool

	mu    sync.Mutex
	fence *Fence
	term  *serving
	// lease is the newest copy read or written.
	lease *coordinationv1.Lease
}

var _ resourcelock.Interface = (*holderLock)(nil)

// setTerm makes the lock the one of a new term.
func (l *holderLock) setTerm(f *Fence, s *serving) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.fence, l.term = f, s
}

// holding reports whether the newest copy names this replica the holder.
func (l *holderLock) holding() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.lease != nil && l.lease.Spec.HolderIdentity != nil && *l.lease.Spec.HolderIdentity == l.identity
}

// Get returns the lease's record and its JSON form.
func (l *holderLock) Get(ctx context.Context) (*resourcelock.LeaderElectionRecord, []byte, error) {
	var lease *coordinationv1.Lease
	var err error
	if l.holding() {
		lease, err = l.client.Leases(l.namespace).Get(ctx, l.name, metav1.GetOptions{})
	} else {
		lease, err = l.cache.Get(l.name)
	}
	if err != nil {
		return nil, nil, err
	}
	l.mu.Lock()
	l.lease = lease.DeepCopy()
	l.mu.Unlock()
	record := resourcelock.LeaseSpecToLeaderElectionRecord(&lease.Spec)
	raw, err := json.Marshal(record)
	if err != nil {
		return nil, nil, err
	}
	return record, raw, nil
}

// Create creates the lease with the record, if this replica may take it.
func (l *holderLock) Create(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	if !l.mayAcquire() {
		return errNotPreferred
	}
	return l.write(r, func() (*coordinationv1.Lease, error) {
		return l.client.Leases(l.namespace).Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: l.name, Namespace: l.namespace, Labels: l.labels},
			Spec:       resourcelock.LeaderElectionRecordToLeaseSpec(&r),
		}, metav1.CreateOptions{})
	})
}

// Update writes the record over the newest copy; taking the lease from
// another holder (or none) needs mayAcquire.
func (l *holderLock) Update(ctx context.Context, r resourcelock.LeaderElectionRecord) error {
	l.mu.Lock()
	base, term := l.lease, l.term
	l.mu.Unlock()
	if base == nil {
		return errors.New("holder lease not read yet")
	}
	if r.HolderIdentity != l.identity && term != nil && !term.stopped() {
		return errStillServing
	}
	if r.HolderIdentity == l.identity && !l.holding() && !l.mayAcquire() {
		return errNotPreferred
	}
	update := base.DeepCopy()
	update.Spec = resourcelock.LeaderElectionRecordToLeaseSpec(&r)
	if update.Labels == nil {
		update.Labels = map[string]string{}
	}
	for k, v := range l.labels {
		update.Labels[k] = v
	}
	return l.write(r, func() (*coordinationv1.Lease, error) {
		return l.client.Leases(l.namespace).Update(ctx, update, metav1.UpdateOptions{})
	})
}

// write runs one write of record r, keeps what it returned and moves the
// fence: up to RenewDeadline past the write's start when it names this
// replica, down when it does not (a release).
func (l *holderLock) write(r resourcelock.LeaderElectionRecord, do func() (*coordinationv1.Lease, error)) error {
	start := time.Now()
	ours := r.HolderIdentity == l.identity
	l.mu.Lock()
	fence := l.fence
	l.mu.Unlock()
	if !ours && fence != nil {
		fence.drop()
	}
	written, err := do()
	if err != nil {
		return err
	}
	l.mu.Lock()
	l.lease = written
	l.mu.Unlock()
	if ours && fence != nil {
		fence.renewed(start)
	}
	return nil
}

// RecordEvent records nothing: the daemon's log says when a node moves.
func (l *holderLock) RecordEvent(string) {}

// Identity is this replica's.
func (l *holderLock) Identity() string { return l.identity }

// Describe names the lease.
func (l *holderLock) Describe() string { return fmt.Sprintf("%s/%s", l.namespace, l.name) }
