// Package podips owns the IPs of a node's pods: it decides them once per
// pod, before the pod is created (so status.podIP(s) in its environment
// resolve, and a retried CreatePod gets the same ones), from the
// provider's choice or the node's pod CIDRs, and frees them when the pod
// ends. It is the only place pod IPs are taken or released.
package podips

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/node/internal/ipam"
	"github.com/vkubelet/virtual-kubelet/node/internal/perpod"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// Config is what the manager needs from the node.
type Config struct {
	// CIDRs returns the node's pod CIDRs (spec.podCIDRs); nil when the node
	// has none to give. An empty answer is asked again at most every
	// RetryInterval.
	CIDRs         func(context.Context) ([]string, error)
	RetryInterval time.Duration
	// Assign is the provider's choice of a pod's IPs, offered those of the
	// pod it is given; nil when the provider does not choose.
	Assign func(ctx context.Context, pod *corev1.Pod) ([]string, error)
	// Existing lists, by pod key, the IPs the node's unfinished pods in the
	// API server have, which an allocator made anew must not hand out.
	Existing func(context.Context) map[string][]string
}

// Manager decides and frees pod IPs; it is safe for concurrent use.
type Manager struct {
	cfg Config

	mu      sync.Mutex
	alloc   *ipam.Allocator
	askedAt time.Time
	// decided are the IPs decided for the pod of each key.
	decided map[string]decision
}

type decision struct {
	uid types.UID
	ips []string
}

// New returns a manager.
func New(cfg Config) *Manager {
	return &Manager{cfg: cfg, decided: map[string]decision{}}
}

// For returns the IPs of the pod of key: those decided for it before, else
// those it has, else the provider's choice among or besides what the node's
// allocator offers.
func (m *Manager) For(ctx context.Context, key string, pod *corev1.Pod) ([]string, error) {
	m.mu.Lock()
	d, ok := m.decided[key]
	m.mu.Unlock()
	if ok && d.uid == pod.UID {
		return d.ips, nil
	}
	ips, err := m.decide(ctx, key, pod)
	if err != nil {
		return nil, err
	}
	m.mu.Lock()
	m.decided[key] = decision{uid: pod.UID, ips: ips}
	m.mu.Unlock()
	return ips, nil
}

func (m *Manager) decide(ctx context.Context, key string, pod *corev1.Pod) ([]string, error) {
	alloc := m.allocator(ctx)
	if len(pod.Status.PodIPs) > 0 {
		ips := Of(pod.Status.PodIPs)
		if alloc != nil {
			alloc.Reserve(key, ips)
		}
		return ips, nil
	}
	var offered []string
	if alloc != nil {
		var err error
		if offered, err = alloc.Allocate(key); err != nil {
			return nil, err
		}
	}
	if m.cfg.Assign == nil {
		return offered, nil
	}
	ips, err := m.cfg.Assign(ctx, WithIPs(pod, offered).DeepCopy())
	if err != nil {
		if alloc != nil {
			alloc.Release(key)
		}
		return nil, fmt.Errorf("provider AssignPodIPs: %w", err)
	}
	if alloc != nil && !slices.Equal(ips, offered) {
		alloc.Release(key)
		alloc.Reserve(key, ips)
	}
	return ips, nil
}

// allocator returns the allocator over the node's pod CIDRs, nil while
// there are none. It is made when they are first seen, holding the IPs of
// the pods existing already.
func (m *Manager) allocator(ctx context.Context) *ipam.Allocator {
	if m.cfg.CIDRs == nil {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.alloc != nil || !m.askedAt.IsZero() && time.Since(m.askedAt) < m.cfg.RetryInterval {
		return m.alloc
	}
	m.askedAt = time.Now()
	cidrs, err := m.cfg.CIDRs(ctx)
	if err != nil {
		log.G(ctx).WithError(err).Warn("reading the node's pod CIDRs")
		return nil
	}
	if len(cidrs) == 0 {
		return nil
	}
	alloc, err := ipam.New(cidrs)
	if err != nil {
		log.G(ctx).WithError(err).Error("the node's pod CIDRs cannot be used to give pods IPs")
		return nil
	}
	if m.cfg.Existing != nil {
		for key, ips := range m.cfg.Existing(ctx) {
			alloc.Reserve(key, ips)
		}
	}
	log.G(ctx).WithField("podCIDRs", cidrs).Info("giving pods IPs from the node's pod CIDRs")
	m.alloc = alloc
	return alloc
}

// PodEnded frees the addresses the allocator gave key's pod: a finished
// pod's sandbox is gone. The decision is kept while the pod's object is
// (a finished pod is not created again), and dropped with a pod replaced or
// gone.
func (m *Manager) PodEnded(key string, end perpod.End) {
	m.mu.Lock()
	alloc := m.alloc
	if end != perpod.Finished {
		delete(m.decided, key)
	}
	m.mu.Unlock()
	if alloc != nil {
		alloc.Release(key)
	}
}

// Len is the number of pod keys holding a decision or addresses.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := len(m.decided)
	if m.alloc != nil {
		n = max(n, m.alloc.Owners())
	}
	return n
}

// InUse is the number of addresses the allocator holds.
func (m *Manager) InUse() int {
	m.mu.Lock()
	alloc := m.alloc
	m.mu.Unlock()
	if alloc == nil {
		return 0
	}
	return alloc.InUse()
}

// WithIPs is pod with status.podIP(s) set to ips (pod itself when they
// are already), sharing the rest: it is only read.
func WithIPs(pod *corev1.Pod, ips []string) *corev1.Pod {
	if slices.Equal(ips, Of(pod.Status.PodIPs)) {
		return pod
	}
	p := *pod
	p.Status.PodIP, p.Status.PodIPs = "", nil
	for _, ip := range ips {
		p.Status.PodIPs = append(p.Status.PodIPs, corev1.PodIP{IP: ip})
	}
	if len(ips) > 0 {
		p.Status.PodIP = ips[0]
	}
	return &p
}

// Of is the addresses of podIPs.
func Of(podIPs []corev1.PodIP) []string {
	out := make([]string, 0, len(podIPs))
	for _, ip := range podIPs {
		out = append(out, ip.IP)
	}
	return out
}
