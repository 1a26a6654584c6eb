package commands

import (
	"testing"

	"k8s.io/client-go/rest"
)

// TestManagedLimiterScalesWithNodes: with managed nodes and the limits at
// their defaults, the client's limits follow the nodes served, never below
// the defaults; a limit given, or none (0), is kept as given.
func TestManagedLimiterScalesWithNodes(t *testing.T) {
	for _, c := range []struct {
		args       []string
		nodes      int
		qps, burst float32 // want, after nodes are served; qps < 0: no limiter
	}{
		{[]string{"--manage-all-nodes"}, 1, DefaultKubeAPIQPS, DefaultKubeAPIBurst},
		{[]string{"--manage-all-nodes"}, 1000, 50_000, 100_000},
		{[]string{"--manage-all-nodes", "--kube-api-qps", "300"}, 1000, 300, 100_000},
		{[]string{"--manage-all-nodes", "--kube-api-qps", "300", "--kube-api-burst", "600"}, 1000, -1, 0},
		{[]string{"--manage-all-nodes", "--kube-api-qps", "0"}, 1000, -1, 0},
		{[]string{"--node-count", "3"}, 1000, -1, 0}, // registered nodes: scaled at start
	} {
		o := scaledOptions(t, c.args...)
		cfg := &rest.Config{}
		m := o.managedLimiter(cfg)
		if c.qps < 0 {
			if m != nil || cfg.RateLimiter != nil {
				t.Errorf("%v: a scaling limiter, want the flags' limits as given", c.args)
			}
			continue
		}
		if m == nil || cfg.RateLimiter != m {
			t.Fatalf("%v: no scaling limiter on the client", c.args)
		}
		m.setNodes(c.nodes)
		if m.QPS() != c.qps || float32(m.l.Burst()) != c.burst {
			t.Errorf("%v with %d nodes: qps %v burst %d, want %v and %v", c.args, c.nodes, m.QPS(), m.l.Burst(), c.qps, c.burst)
		}
		m.setNodes(0) // all gone: back to the floor
		if want := o.Client.KubeAPIQPS; m.QPS() != want {
			t.Errorf("%v with no node: qps %v, want the floor %v", c.args, m.QPS(), want)
		}
		if !m.TryAccept() {
			t.Errorf("%v: no token in a fresh limiter", c.args)
		}
	}
}
