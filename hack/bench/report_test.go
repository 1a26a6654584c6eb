package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	k8sprovider "github.com/vkubelet/virtual-kubelet/providers/kubernetes"
)

func pass(running, gone time.Duration) *phaseResult {
	return &phaseResult{AllRunning: running, AllGone: gone}
}

// The daemon's ratios are to the one floor, or in A→B mode to the sum of
// A's and B's floors; the floor's CPU is the floor pass's less the daemon
// pass's.
func TestFloorOfOneAndTwoClusters(t *testing.T) {
	one := &result{N: 1000, Floor: pass(4*time.Second, 6*time.Second), Daemon: pass(8*time.Second, 9*time.Second)}
	one.BenchCPU.Floor, one.BenchCPU.Daemon = 3*time.Second, 1*time.Second
	if r, g := one.floor(); r != 4*time.Second || g != 6*time.Second {
		t.Errorf("one cluster: floor %v, %v; want 4s, 6s", r, g)
	}
	if got := one.floorCPU(); got != 2*time.Second {
		t.Errorf("one cluster: floor CPU %v, want 2s", got)
	}

	two := &result{N: 1000, Floor: pass(4*time.Second, 6*time.Second), FloorB: pass(2*time.Second, 3*time.Second),
		Daemon: pass(12*time.Second, 4500*time.Millisecond), Remote: &remoteResult{}}
	if r, g := two.floor(); r != 6*time.Second || g != 9*time.Second {
		t.Errorf("two clusters: floor %v, %v; want 6s, 9s", r, g)
	}
	text := report([]*result{two})
	for _, want := range []string{"| 4.00s | 2.00s | 6.00s | 12.00s | **2.00x** |", "| 6.00s | 3.00s | 9.00s | 4.50s | **0.50x** |", "500/1000 (default)"} {
		if !strings.Contains(text, want) {
			t.Errorf("A→B report lacks %q:\n%s", want, text)
		}
	}
	if strings.Contains(report([]*result{one}), "floor B") {
		t.Error("the one-cluster report has a floor B column")
	}
}

func TestRemoteLimits(t *testing.T) {
	for _, c := range []struct {
		qps   float64
		burst int
		want  string
	}{{0, 0, "500/1000 (default)"}, {50, 100, "50/100"}, {200, 0, "200/1000"}, {12.5, 1000, "12.5/1000"}} {
		if got := remoteLimits(&remoteResult{QPS: c.qps, Burst: c.burst}); got != c.want {
			t.Errorf("remoteLimits(%v, %d) = %q, want %q", c.qps, c.burst, got, c.want)
		}
	}
}

// allAt is when the last pod reached a stage, and only once all n did.
func TestTrackerAllAt(t *testing.T) {
	start := time.Now()
	tr := newTracker(2)
	tr.bound["a"] = start.Add(time.Second)
	if got := tr.allAt(tr.bound, start); got != 0 {
		t.Errorf("one of two bound: %v, want 0", got)
	}
	tr.bound["b"] = start.Add(3 * time.Second)
	if got := tr.allAt(tr.bound, start); got != 3*time.Second {
		t.Errorf("both bound: %v, want 3s", got)
	}
	pod := &corev1.Pod{}
	pod.Name, pod.Spec.NodeName = "c", "n"
	tr.observe(pod)
	if _, ok := tr.bound["c"]; !ok {
		t.Error("a pod seen with spec.nodeName set is not recorded as bound")
	}
}

// The generated provider config passes the provider's own validation and
// carries what the pass needs: B's kubeconfig and namespace, room for the
// pods, the toleration for B's mock node, and the limits only when set.
func TestProviderConfig(t *testing.T) {
	dir := t.TempDir()
	kubeconfig := filepath.Join(dir, "b.kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte("apiVersion: v1\nkind: Config\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, limits := range []struct {
		qps   float64
		burst int
	}{{0, 0}, {500, 1000}} {
		data, err := yaml.Marshal(providerConfig(kubeconfig, filepath.Join(dir, "key"), "bench-remote-1000", 1000, limits.qps, limits.burst))
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(dir, "provider.yaml")
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := k8sprovider.LoadConfig(path)
		if err != nil {
			t.Fatalf("%s\n%v", data, err)
		}
		if cfg.Remote.Kubeconfig != kubeconfig || cfg.Namespace != "bench-remote-1000" {
			t.Errorf("remote %+v, namespace %q", cfg.Remote, cfg.Namespace)
		}
		if cfg.Remote.QPS != float32(limits.qps) || cfg.Remote.Burst != limits.burst {
			t.Errorf("limits %v/%d, want %v/%d", cfg.Remote.QPS, cfg.Remote.Burst, limits.qps, limits.burst)
		}
		if cfg.Capacity["pods"] != "10000" {
			t.Errorf("pod capacity %q, want 10000 for 1000 pods", cfg.Capacity["pods"])
		}
		if len(cfg.Pods.Tolerations) != 1 || cfg.Pods.Tolerations[0].Key != "virtual-kubelet.io/provider" {
			t.Errorf("tolerations %+v, want one for virtual-kubelet.io/provider", cfg.Pods.Tolerations)
		}
	}
}

// With -repeat, the report gives each run's ratios in order and their
// medians; without it, no such table.
func TestRepeatsTable(t *testing.T) {
	floor := pass(10*time.Second, 10*time.Second)
	var results []*result
	for i, gone := range []time.Duration{10 * time.Second, 12 * time.Second, 11 * time.Second, 9 * time.Second} {
		results = append(results, &result{N: 1000, Run: i + 1, DaemonFirst: i%2 == 1, Floor: floor, Daemon: pass(8*time.Second, gone)})
	}
	var b strings.Builder
	repeatsTable(&b, results)
	want := "| 1000 | 4 | 0.80x, 0.80x, 0.80x, 0.80x (median **0.80x**) | 1.00x, 1.20x, 1.10x, 0.90x (median **1.05x**) | – | – |"
	if !strings.Contains(b.String(), want) {
		t.Errorf("repeats table lacks %q:\n%s", want, b.String())
	}
	if got := results[1].size(); got != "1000, run 2 (daemon first)" {
		t.Errorf("run 2's row is named %q", got)
	}
	once := []*result{{N: 1000, Floor: floor, Daemon: pass(8*time.Second, 9*time.Second)}}
	b.Reset()
	repeatsTable(&b, once)
	if b.Len() != 0 || once[0].size() != "1000" {
		t.Errorf("one run: repeats table %q, row %q", b.String(), once[0].size())
	}
}
