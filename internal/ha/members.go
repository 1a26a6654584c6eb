package ha

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	coordinationv1listers "k8s.io/client-go/listers/coordination/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// Lease names and the label that groups the replicas of one node set.
const (
	replicaLeasePrefix = "vk-replica-"
	// HolderLeasePrefix + a node's name is the name of its holder lease.
	HolderLeasePrefix = "vk-holder-"
	// GroupLabel is on the leases of the replicas that share one node set
	// (the same --nodename): its value is GroupOf the node name.
	GroupLabel = "virtual-kubelet.io/replicas-of"
)

// HolderLeaseName is the name of node's holder lease.
func HolderLeaseName(node string) string { return HolderLeasePrefix + node }

// GroupOf is the label value naming the replicas of the nodes named name:
// name itself when it fits in a label value, else a hash of it.
func GroupOf(name string) string {
	if len(validation.IsValidLabelValue(name)) == 0 {
		return name
	}
	sum := sha256.Sum256([]byte(name))
	return hex.EncodeToString(sum[:16])
}

// Config is what the replicas of one node set agree on.
type Config struct {
	Client kubernetes.Interface
	// Namespace holds the holder and membership leases.
	Namespace string
	// Identity names this replica; unique among the replicas.
	Identity string
	// Nodes are the nodes the replicas share.
	Nodes []string
	// Group is GroupOf the replicas' node name.
	Group string
	// LeaseDuration, RenewDeadline and RetryPeriod are leaderelection's; the
	// membership lease has the same duration and is renewed every
	// RetryPeriod.
	LeaseDuration time.Duration
	RenewDeadline time.Duration
	RetryPeriod   time.Duration
}

// Members announces this replica with a membership lease, renewed every
// RetryPeriod and deleted when it stops, and follows the leases of the
// group, the nodes' holder leases included: a replica is live while its lease changed, as seen here, within
// LeaseDuration (local observation, as leaderelection's, so clocks need not
// agree).
type Members struct {
	cfg Config
	// joined is when this replica first announced itself.
	joined time.Time

	// done is closed once the lease is deleted, at the end.
	done chan struct{}
	// leases lists the group's leases from the informer's cache.
	leases coordinationv1listers.LeaseNamespaceLister
	// written is the lease as the last write left it; only announce, on
	// one goroutine at a time, touches it.
	written *coordinationv1.Lease

	mu sync.Mutex
	// assignment is Assign of the nodes to assignedTo, the live members
	// (sorted) when it was last asked for.
	assignment map[string]string
	assignedTo []string
	// seen is when each replica's lease last changed, by our clock.
	seen map[string]seenLease
	// added are the nodes AddNode added, sorted.
	added []string
}

type seenLease struct {
	at              time.Time
	resourceVersion string
}

// StartMembers writes this replica's membership lease, starts following the
// group's, and returns once it has listed them. Both stop when ctx ends,
// the lease being deleted then so the others move its nodes at once.
func StartMembers(ctx context.Context, cfg Config) (*Members, error) {
	m := &Members{cfg: cfg, joined: time.Now(), seen: map[string]seenLease{}, done: make(chan struct{})}
	if err := m.announce(ctx); err != nil {
		return nil, fmt.Errorf("writing the replica lease %s/%s: %w", cfg.Namespace, m.leaseName(), err)
	}
	factory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, 0, informers.WithNamespace(cfg.Namespace),
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = GroupLabel + "=" + cfg.Group }))
	inf := factory.Coordination().V1().Leases().Informer()
	m.leases = factory.Coordination().V1().Leases().Lister().Leases(cfg.Namespace)
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    m.observe,
		UpdateFunc: func(_, obj any) { m.observe(obj) },
		DeleteFunc: m.forget,
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		factory.Shutdown()
		return nil, fmt.Errorf("listing the replica leases: %w", context.Cause(ctx))
	}
	go func() {
		defer close(m.done)
		defer factory.Shutdown()
		m.renewLoop(ctx)
	}()
	return m, nil
}

func (m *Members) leaseName() string { return replicaLeasePrefix + m.cfg.Identity }

func (m *Members) lease() *coordinationv1.Lease {
	return &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: m.leaseName(), Namespace: m.cfg.Namespace, Labels: map[string]string{GroupLabel: m.cfg.Group}},
		Spec: coordinationv1.LeaseSpec{
			HolderIdentity:       ptr.To(m.cfg.Identity),
			LeaseDurationSeconds: ptr.To(int32(m.cfg.LeaseDuration / time.Second)),
			RenewTime:            ptr.To(metav1.NewMicroTime(time.Now())),
		},
	}
}

// announce creates or renews this replica's lease, writing over the copy
// its last write returned and reading the lease only when that fails.
func (m *Members) announce(ctx context.Context) error {
	leases := m.cfg.Client.CoordinationV1().Leases(m.cfg.Namespace)
	want := m.lease()
	if m.written != nil {
		want.ResourceVersion = m.written.ResourceVersion
		if written, err := leases.Update(ctx, want, metav1.UpdateOptions{}); err == nil {
			m.written = written
			return nil
		}
	}
	existing, err := leases.Get(ctx, want.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		want.ResourceVersion = ""
		m.written, err = leases.Create(ctx, want, metav1.CreateOptions{})
	case err == nil:
		want.ResourceVersion = existing.ResourceVersion
		m.written, err = leases.Update(ctx, want, metav1.UpdateOptions{})
	}
	return err
}

// renewLoop renews the lease until ctx ends, then deletes it, and removes
// the leases of replicas dead for long (killed ones never delete theirs).
func (m *Members) renewLoop(ctx context.Context) {
	t := time.NewTicker(m.cfg.RetryPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			del, cancel := context.WithTimeout(context.WithoutCancel(ctx), m.cfg.RenewDeadline)
			defer cancel()
			if err := m.cfg.Client.CoordinationV1().Leases(m.cfg.Namespace).Delete(del, m.leaseName(), metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
				log.G(ctx).WithError(err).Warn("deleting the replica lease")
			}
			return
		case <-t.C:
			if err := m.announce(ctx); err != nil && ctx.Err() == nil {
				log.G(ctx).WithError(err).Warn("renewing the replica lease")
			}
			m.collect(ctx)
		}
	}
}

// deadFor is how long a replica's lease must have stood still before it is
// deleted: long past its expiry, so a replica paused for a while is not
// taken for gone by a replica with a slow watch.
const deadFor = 10

// collect deletes the leases of replicas dead for deadFor lease durations,
// provided they did not change since (the resourceVersion precondition).
func (m *Members) collect(ctx context.Context) {
	m.mu.Lock()
	var stale []struct{ id, rv string }
	for id, s := range m.seen {
		if id != m.cfg.Identity && time.Since(s.at) > deadFor*m.cfg.LeaseDuration {
			stale = append(stale, struct{ id, rv string }{id, s.resourceVersion})
		}
	}
	m.mu.Unlock()
	for _, s := range stale {
		err := m.cfg.Client.CoordinationV1().Leases(m.cfg.Namespace).Delete(ctx, replicaLeasePrefix+s.id,
			metav1.DeleteOptions{Preconditions: &metav1.Preconditions{ResourceVersion: &s.rv}})
		if err != nil && !apierrors.IsNotFound(err) && !apierrors.IsConflict(err) {
			log.G(ctx).WithError(err).WithField("replica", s.id).Warn("deleting a dead replica's lease")
		}
	}
}

func (m *Members) observe(obj any) {
	l, ok := obj.(*coordinationv1.Lease)
	if !ok || l.Spec.HolderIdentity == nil || replicaLeasePrefix+*l.Spec.HolderIdentity != l.Name {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	id := *l.Spec.HolderIdentity
	if s, ok := m.seen[id]; !ok || s.resourceVersion != l.ResourceVersion {
		m.seen[id] = seenLease{at: time.Now(), resourceVersion: l.ResourceVersion}
	}
}

func (m *Members) forget(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if l, ok := obj.(*coordinationv1.Lease); ok && l.Spec.HolderIdentity != nil {
		m.mu.Lock()
		defer m.mu.Unlock()
		delete(m.seen, *l.Spec.HolderIdentity)
	}
}

// Live are the replicas whose lease changed within LeaseDuration, this one
// always among them.
func (m *Members) Live() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	live := []string{m.cfg.Identity}
	for id, s := range m.seen {
		if id != m.cfg.Identity && time.Since(s.at) < m.cfg.LeaseDuration {
			live = append(live, id)
		}
	}
	return live
}

// Joining reports whether this replica is still in its first two retry
// periods, in which it takes no node: replicas started together (a
// Deployment's first rollout) have seen each other's membership leases by
// then, so each takes its share at once instead of the first taking every
// node and handing most of them over, which at a thousand nodes is a
// storm of node starts and stops on the API server.
func (m *Members) Joining() bool {
	return time.Since(m.joined) < 2*m.cfg.RetryPeriod
}

// Preferred is the replica that should serve node: its holder in the
// assignment of the nodes to the live replicas, recomputed only when they
// change.
func (m *Members) Preferred(node string) string {
	live := m.Live()
	slices.Sort(live)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.assignedTo == nil || !slices.Equal(live, m.assignedTo) {
		m.assignment, m.assignedTo = Assign(m.nodes(), live), live
	}
	return m.assignment[node]
}

// Wait returns once the membership lease is deleted, after ctx ended.
func (m *Members) Wait() { <-m.done }
