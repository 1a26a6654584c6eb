package node

import (
	"context"
	"fmt"
	"net/netip"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vkubelet/virtual-kubelet/node/internal/podips"
)

// PodCIDRRetryInterval is how often PodControllerConfig.PodCIDRs is asked
// again while the node has no pod CIDR (the controller-manager sets it
// shortly after the node registers, or never).
const PodCIDRRetryInterval = 5 * time.Second

// ReasonFailedCreatePodSandBox is the kubelet's Event reason for a pod that
// cannot get its IPs (its node's pod CIDR is full, or the provider's
// AssignPodIPs failed); the pod is retried.
const ReasonFailedCreatePodSandBox = "FailedCreatePodSandBox"

// newPodIPs returns the manager of the pods' IPs, nil when the controller
// does not resolve the pods' IP fields itself (a runtime that resolves the
// environment gives the pod its IPs) or nothing can choose IPs.
func newPodIPs(pc *PodController, cfg PodControllerConfig) *podips.Manager {
	assigner := pc.caps.IPs
	if pc.skipEnv || pc.env.KeepObjectRefs || (assigner == nil && cfg.PodCIDRs == nil) {
		return nil
	}
	c := podips.Config{CIDRs: cfg.PodCIDRs, RetryInterval: PodCIDRRetryInterval, Existing: pc.podsWithIPs}
	if assigner != nil {
		c.Assign = func(ctx context.Context, pod *corev1.Pod) ([]string, error) {
			var ips []string
			err := pc.traceProvider(ctx, "AssignPodIPs", func(ctx context.Context) error {
				var err error
				if ips, err = assigner.AssignPodIPs(ctx, pod); err != nil {
					return err
				}
				return validIPs(ips)
			})
			return ips, err
		}
	}
	return podips.New(c)
}

// withPodIPs returns the pod for env resolution and CreatePod: pod with its
// IPs decided, once per pod (see PodIPAssigner).
func (pc *PodController) withPodIPs(ctx context.Context, pod *corev1.Pod) (*corev1.Pod, error) {
	if pc.ips == nil {
		return pod, nil
	}
	ips, err := pc.ips.For(ctx, podKey(pod), pod)
	if err != nil {
		return nil, err
	}
	return podips.WithIPs(pod, ips), nil
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
			out[podKey(pod)] = podips.Of(pod.Status.PodIPs)
		}
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
