package main

import (
	"context"
	"crypto/rand"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"sigs.k8s.io/yaml"

	k8sprovider "github.com/vkubelet/virtual-kubelet/providers/kubernetes"
)

// remoteResult is what A→B mode measures on B's side of the daemon pass.
type remoteResult struct {
	// QPS and Burst are the provider's remote client limits as configured
	// (0: the provider's defaults).
	QPS   float64
	Burst int
	// Stages is when the last of B's pods reached each stage.
	Stages remoteStages
	// Workers is the CPU of B's mock node over the pass (steady window
	// excluded) and its peak RSS.
	Workers processUsage
	// APICalls are B's API server pod requests during the pass (all
	// clients: the provider, B's scheduler, B's mock node).
	APICalls map[string]float64
	// Client is the A daemon's traffic to B.
	Client clientStats
}

// remoteStages is when the last of B's pods was created, bound to the mock
// node by B's scheduler and Running, counted from the first create in A;
// and when the last was gone from B, counted from the first delete in A.
type remoteStages struct {
	Created, Scheduled, Running, Gone time.Duration
}

// remoteSide is cluster B during the daemon pass: the workers (a mock
// node) that run A's pods there, the namespace the provider puts them in,
// and a tracker of B's pods. Its methods do nothing on a nil one, so the
// single-cluster pass calls them unconditionally.
type remoteSide struct {
	cluster     *cluster
	workerNodes []string
	workers     *benchDaemon
	namespace   string
	configPath  string
	keyPath     string
	qps         float64
	burst       int
	pods        *tracker
	stopWatch   context.CancelFunc

	callsBefore             map[string]float64
	usageBefore             processUsage
	steadyBefore, steadyCPU time.Duration
}

// startRemote starts B's workers and makes the namespace and the provider
// config for a pass of n pods.
func startRemote(ctx context.Context, c config, b *cluster, n int) (*remoteSide, error) {
	s := &remoteSide{cluster: b, qps: c.remoteQPS, burst: c.remoteBurst}
	workers := fmt.Sprintf("bench-workers-%d", n)
	s.workerNodes = nodeNames(workers, 1)
	ns, err := namespace(ctx, b.client, fmt.Sprintf("bench-remote-%d", n))
	if err != nil {
		return nil, err
	}
	s.namespace = ns
	s.workers, err = startDaemon(ctx, c, daemonSpec{name: workers, nodes: 1, kubeconfig: b.info.Kubeconfig, provider: []string{"--provider", "mock"}})
	if err != nil {
		s.stop()
		return nil, err
	}
	if err := waitNodeReady(ctx, b.client, workers); err != nil {
		s.stop()
		return nil, fmt.Errorf("cluster B's workers %s: %w (log: %s)", workers, err, s.workers.logPath)
	}
	s.keyPath = filepath.Join(os.TempDir(), fmt.Sprintf("bench-vk-%d-signing-key", n))
	if err := os.WriteFile(s.keyPath, []byte(rand.Text()+rand.Text()), 0o600); err != nil {
		s.stop()
		return nil, err
	}
	cfg := providerConfig(b.info.Kubeconfig, s.keyPath, ns, n, c.remoteQPS, c.remoteBurst)
	data, err := yaml.Marshal(cfg)
	if err != nil {
		s.stop()
		return nil, err
	}
	s.configPath = filepath.Join(os.TempDir(), fmt.Sprintf("bench-vk-%d-provider.yaml", n))
	if err := os.WriteFile(s.configPath, data, 0o644); err != nil {
		s.stop()
		return nil, err
	}
	// The daemon would say the same, later and in its log.
	if _, err := k8sprovider.LoadConfig(s.configPath); err != nil {
		s.stop()
		return nil, err
	}
	s.pods = newTracker(n)
	var watchCtx context.Context
	watchCtx, s.stopWatch = context.WithCancel(ctx)
	s.pods.watch(watchCtx, b.client, ns)
	return s, nil
}

// providerConfig is the kubernetes provider's config for the pass: B's
// admin kubeconfig, one namespace, room for many more than n pods, and the
// toleration that lets B's scheduler put them on the mock node.
func providerConfig(kubeconfig, signingKey, namespace string, n int, qps float64, burst int) *k8sprovider.Config {
	return &k8sprovider.Config{
		Remote:         k8sprovider.RemoteConfig{Kubeconfig: kubeconfig, QPS: float32(qps), Burst: burst},
		Namespace:      namespace,
		SourceCluster:  "bench",
		SigningKeyFile: signingKey,
		Capacity:       map[string]string{"cpu": "1000", "memory": "4Ti", "pods": strconv.Itoa(10 * n)},
		Pods: k8sprovider.RemotePodScheduling{
			Tolerations: []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists}},
		},
	}
}

// passStarts marks the start of the daemon pass.
func (s *remoteSide) passStarts() {
	if s == nil {
		return
	}
	s.usageBefore = s.workers.usage()
	s.callsBefore, _ = apiServerPodCalls(context.Background(), s.cluster.client)
}

func (s *remoteSide) steadyStarts() {
	if s == nil {
		return
	}
	s.steadyBefore = s.workers.usage().CPU
}

func (s *remoteSide) steadyEnds() {
	if s == nil {
		return
	}
	s.steadyCPU += s.workers.usage().CPU - s.steadyBefore
}

// passEnds returns B's side of the pass: pass is A's daemon pass, client
// the daemon's traffic to B.
func (s *remoteSide) passEnds(ctx context.Context, pass *phaseResult, client clientStats) *remoteResult {
	after := s.workers.usage()
	calls, _ := apiServerPodCalls(ctx, s.cluster.client)
	return &remoteResult{
		QPS: s.qps, Burst: s.burst,
		Stages: remoteStages{
			Created:   s.pods.allAt(s.pods.seen, pass.Start),
			Scheduled: s.pods.allAt(s.pods.bound, pass.Start),
			Running:   s.pods.allAt(s.pods.running, pass.Start),
			Gone:      s.pods.allAt(s.pods.gone, pass.DeleteStart),
		},
		Workers:  processUsage{CPU: after.CPU - s.usageBefore.CPU - s.steadyCPU, PeakRSS: after.PeakRSS},
		APICalls: diff(calls, s.callsBefore),
		Client:   client,
	}
}

// stop stops the workers and removes the namespace and their node from B.
func (s *remoteSide) stop() {
	if s == nil {
		return
	}
	if s.stopWatch != nil {
		s.stopWatch()
	}
	if s.workers != nil {
		s.workers.stop()
	}
	if s.namespace != "" {
		cleanup(s.cluster.client, s.namespace, s.workerNodes)
	}
	if s.configPath != "" {
		os.Remove(s.configPath)
	}
	if s.keyPath != "" {
		os.Remove(s.keyPath)
	}
}
