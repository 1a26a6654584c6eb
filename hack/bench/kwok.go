package main

import (
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// kwokAnnotation marks the Nodes kwok is told to manage.
const kwokAnnotation = "kwok.x-k8s.io/node"

// kwokResult is the kwok pass: the same pods on nodes kwok manages.
type kwokResult struct {
	Pass       *phaseResult
	Usage      processUsage // CPU from the first create to the last gone; peak RSS
	IdleRSS    int64        // with its nodes Ready and no pods
	NodesReady time.Duration
}

// kwokPass runs kwok (hack/kwok/build.sh's directory: bin/kwok and its fast
// stages) managing nodes the bench registers, as kwok's users do, and drives
// the same pods through them.
func kwokPass(ctx context.Context, c config, cl *cluster, n, nodes int) (*kwokResult, error) {
	prefix := fmt.Sprintf("bench-kwok-%d", n)
	logf("N=%d kwok: %d node(s), its fast stages", n, nodes)
	names := nodeNames(prefix, nodes)
	ns, err := namespace(ctx, cl.client, prefix)
	if err != nil {
		return nil, err
	}
	defer cleanup(cl.client, ns, names)
	if err := registerKwokNodes(ctx, cl.client, prefix, names); err != nil {
		return nil, err
	}
	started := time.Now()
	proc, err := startLogged(exec.CommandContext(ctx, filepath.Join(c.kwokDir, "bin", "kwok"),
		"--kubeconfig", cl.info.Kubeconfig,
		"--config", filepath.Join(c.kwokDir, "stages.yaml"),
		"--manage-nodes-with-annotation-selector", kwokAnnotation+"=fake",
		// kwok's default pod range is one /24; the bench runs thousands of
		// pods on one node.
		"--cidr", "10.64.0.0/10",
		"--node-lease-duration-seconds", "40",
	), prefix)
	if err != nil {
		return nil, err
	}
	defer proc.stop()
	logPath := proc.logPath
	logf("kwok: pid %d, log %s", proc.Cmd.Process.Pid, logPath)
	for _, name := range names {
		if err := waitNodeReady(ctx, cl.client, name); err != nil {
			return nil, fmt.Errorf("kwok: node %s: %w (log: %s)", name, err, logPath)
		}
	}
	r := &kwokResult{NodesReady: time.Since(started)}
	before := proc.usage()
	r.IdleRSS = before.PeakRSS
	r.Pass, err = runPass(ctx, cl.client, ns, names, n, c.workers, newTracker(n), passHooks{phase: apiServerProfiler(c, cl.client, "kwok", n)})
	if err != nil {
		return nil, fmt.Errorf("kwok: %w (log: %s)", err, logPath)
	}
	after := proc.usage()
	r.Usage = processUsage{CPU: after.CPU - before.CPU, PeakRSS: after.PeakRSS}
	logf("N=%d kwok: all Running in %s, all gone in %s", n, r.Pass.AllRunning.Round(time.Millisecond), r.Pass.AllGone.Round(time.Millisecond))
	return r, nil
}

// passLabel names the pass whose Nodes the bench created: the daemon
// manages those of its own pass alone.
const passLabel = "bench.vkubelet.io/pass"

// registerKwokNodes creates the Nodes kwok (or the daemon, managing Nodes)
// manages: bare objects with the annotation kwok selects by, and pass's
// label; kwok's node-initialize stage, or the daemon, fills their status.
func registerKwokNodes(ctx context.Context, client kubernetes.Interface, pass string, names []string) error {
	return parallel(ctx, len(names), 50, func(i int) error {
		_, err := client.CoreV1().Nodes().Create(ctx, &corev1.Node{ObjectMeta: metav1.ObjectMeta{
			Name:        names[i],
			Annotations: map[string]string{kwokAnnotation: "fake"},
			Labels:      map[string]string{"type": "kwok", corev1.LabelHostname: names[i], passLabel: pass},
		}}, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("registering kwok node %s: %w", names[i], err)
		}
		return nil
	})
}
