package node

import (
	"context"
	"fmt"
	"net/netip"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vkubelet/virtual-kubelet/node/internal/ipam"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// PodCIDRRetryInterval is how often PodControllerConfig.PodCIDRs is asked
// again while the node has no pod CIDR (the controller-manager sets it
// shortly after the node registers, or never).
const PodCIDRRetryInterval = 5 * time.Second

// ReasonFailedCreatePodSandBox is the kubelet's Event reason for a pod that
// cannot get its IPs (its node's pod CIDR is full, or the provider's
// AssignPodIPs failed); the pod is retried.
const ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"

// podIPs is what the controller needs to give pods their IPs before they
// are created: the provider's choice, and an allocator over the node's pod
// CIDRs, made once they are known.
type podIPs struct {
	// enabled is set when the controller resolves the pods' IP fields
	// itself and something can choose IPs.
	enabled  bool
	assigner PodIPAssigner
	cidrs    func(context.Context) ([]string, error)

	mu      sync.Mutex
	alloc   *ipam.Allocator
	askedAt time.Time
}

func newPodIPs(pc *PodController, cfg PodControllerConfig) *podIPs {
	s := &podIPs{cidrs: cfg.PodCIDRs, assigner: pc.caps.IPs}
	// A runtime that resolves the environment itself gives the pod its IPs.
	s.enabled = !pc.skipEnv && !pc.env.KeepObjectRefs && (s.assigner != nil || s.cidrs != nil)
	return s
}

// withPodIPs returns the pod for env resolution and CreatePod: pod with its
// IPs decided, once per pod (see PodIPAssigner).
func (pc *PodController) withPodIPs(ctx context.Context, pod *corev1.Pod, rec *podRecord) (*corev1.Pod, error) {
	if !pc.ips.enabled {
		return pod, nil
	}
	ips, decided := rec.view().podIPsFor(pod.UID)
	if !decided {
		var err error
		if ips, err = pc.decidePodIPs(ctx, pod); err != nil {
			return nil, err
		}
		rec.podIPsDecided(pod.UID, ips)
	}
	return podWithIPs(pod, ips), nil
}

// decidePodIPs chooses a pod's IPs: those it has, else the provider's
// choice among or besides what the node's allocator offers.
func (pc *PodController) decidePodIPs(ctx context.Context, pod *corev1.Pod) ([]string, error) {
	key := podKey(pod)
	alloc := pc.ips.allocator(ctx, pc.podsWithIPs)
	if len(pod.Status.PodIPs) > 0 {
		ips := ipsOf(pod.Status.PodIPs)
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
	if pc.ips.assigner == nil {
		return offered, nil
	}
	var ips []string
	err := pc.traceProvider(ctx, "AssignPodIPs", func(ctx context.Context) error {
		var err error
		if ips, err = pc.ips.assigner.AssignPodIPs(ctx, podWithIPs(pod, offered).DeepCopy()); err != nil {
			return err
		}
		return validIPs(ips)
	})
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

// podsWithIPs lists the node's unfinished pods in the API server that have
// IPs, whose addresses a new allocator must not hand out again.
func (pc *PodController) podsWithIPs(ctx context.Context) map[string][]string {
	pods, err := pc.lister.List(labels.Everything())
	if err != nil {
		return nil
	}
	out := map[string][]string{}
	for _, pod := range pods {
		if len(pod.Status.PodIPs) > 0 && !isTerminalPhase(pod.Status.Phase) && pc.accept(ctx, pod) {
			out[podKey(pod)] = ipsOf(pod.Status.PodIPs)
		}
	}
	return out
}

// allocator returns the allocator over the node's pod CIDRs, nil while
// there are none. It is made when they are first seen, holding the IPs of
// the pods existing already.
func (s *podIPs) allocator(ctx context.Context, existing func(context.Context) map[string][]string) *ipam.Allocator {
	if s.cidrs == nil {
		return nil
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.alloc != nil || !s.askedAt.IsZero() && time.Since(s.askedAt) < PodCIDRRetryInterval {
		return s.alloc
	}
	s.askedAt = time.Now()
	cidrs, err := s.cidrs(ctx)
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
	for key, ips := range existing(ctx) {
		alloc.Reserve(key, ips)
	}
	log.G(ctx).WithField("podCIDRs", cidrs).Info("giving pods IPs from the node's pod CIDRs")
	s.alloc = alloc
	return alloc
}

// release frees the IPs the allocator gave key's pod.
func (s *podIPs) release(key string) {
	s.mu.Lock()
	alloc := s.alloc
	s.mu.Unlock()
	if alloc != nil {
		alloc.Release(key)
	}
}

// podWithIPs is pod with status.podIP(s) set to ips (pod itself when they
// are already), sharing the rest: it is only read.
func podWithIPs(pod *corev1.Pod, ips []string) *corev1.Pod {
	if slices.Equal(ips, ipsOf(pod.Status.PodIPs)) {
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

func ipsOf(podIPs []corev1.PodIP) []string {
	out := make([]string, 0, len(podIPs))
	for _, ip := range podIPs {
		out = append(out, ip.IP)
	}
	return out
}

// validIPs checks a provider's answer: addresses, at most one per family.
func validIPs(ips []string) error {
	var families [2]bool
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			return fmt.Errorf("pod IP %q: %w", s, err)
		}
		f := 0
		if ip.Is6() && !ip.Is4In6() {
			f = 1
		}
		if families[f] {
			return fmt.Errorf("pod IPs %v: more than one of an IP family", ips)
		}
		families[f] = true
	}
	return nil
}
