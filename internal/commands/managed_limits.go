package commands

import (
	"context"

	"golang.org/x/time/rate"
	"k8s.io/client-go/rest"
)

// managedLimiter is the API client's rate limiter of a daemon of managed
// nodes whose --kube-api-qps or --kube-api-burst were left at their
// defaults: those scale with the nodes it serves, as --node-count scales
// them (scaleClientLimits), since how many Nodes match is known only as
// they come and go. The flag's value stays the floor.
type managedLimiter struct {
	l                    *rate.Limiter
	baseQPS              float64
	baseBurst            int
	scaleQPS, scaleBurst bool
}

// managedLimiter sets restCfg's rate limiter to one that scales with the
// managed nodes when the limits were left at their defaults, and returns
// it; otherwise (a limit given, or none: --kube-api-qps 0) nil.
func (o *Options) managedLimiter(restCfg *rest.Config) *managedLimiter {
	c := &o.Client
	if !o.Node.Managed.Enabled() || c.KubeAPIQPS == 0 || !c.qpsScales && !c.burstScales {
		return nil
	}
	m := &managedLimiter{
		l:       rate.NewLimiter(rate.Limit(c.KubeAPIQPS), c.KubeAPIBurst),
		baseQPS: float64(c.KubeAPIQPS), baseBurst: c.KubeAPIBurst,
		scaleQPS: c.qpsScales, scaleBurst: c.burstScales,
	}
	restCfg.RateLimiter = m
	return m
}

// setNodes scales the limits to n nodes served.
func (m *managedLimiter) setNodes(n int) {
	if m == nil {
		return
	}
	if m.scaleQPS {
		m.l.SetLimit(rate.Limit(max(m.baseQPS, float64(kubeAPIQPSPerNode*n))))
	}
	if m.scaleBurst {
		m.l.SetBurst(max(m.baseBurst, kubeAPIBurstPerNode*n))
	}
}

// TryAccept takes a token if one is there (flowcontrol.RateLimiter).
func (m *managedLimiter) TryAccept() bool { return m.l.Allow() }

// Accept waits for a token (flowcontrol.RateLimiter).
func (m *managedLimiter) Accept() { _ = m.l.Wait(context.Background()) }

// Stop does nothing: the limiter holds no goroutine (flowcontrol.RateLimiter).
func (m *managedLimiter) Stop() {}

// QPS is the current rate (flowcontrol.RateLimiter).
func (m *managedLimiter) QPS() float32 { return float32(m.l.Limit()) }

// Wait waits for a token until ctx ends (flowcontrol.RateLimiter).
func (m *managedLimiter) Wait(ctx context.Context) error { return m.l.Wait(ctx) }
