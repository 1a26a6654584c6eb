package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"
)

// pluginResult is the out-of-process pass (-plugin): the mock behind the
// plugin boundary, the daemon talking to it with --provider grpc.
type pluginResult struct {
	Pass *phaseResult
	// Daemon and Plugin are each process's CPU over the pass and peak RSS.
	Daemon, Plugin processUsage
	// Stats are the daemon's requests, provider calls and queues.
	Stats daemonStats
}

// pluginPass runs the same binary twice: `virtual-kubelet plugin
// --provider mock` on a unix socket, and the daemon with --provider grpc
// for one node, then drives the pods through them.
func pluginPass(ctx context.Context, c config, cl *cluster, n int) (*pluginResult, error) {
	prefix := fmt.Sprintf("bench-plugin-%d", n)
	logf("N=%d plugin: the mock out of process, on a unix socket", n)
	dir, err := os.MkdirTemp("", "vk-bench-plugin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(dir)
	sock := filepath.Join(dir, "mock.sock")
	pprofAddr, err := freeAddr("127.0.0.1")
	if err != nil {
		return nil, err
	}
	plugin, err := startLogged(exec.CommandContext(ctx, c.binary, "plugin", "--provider", "mock", "--nodename", prefix, "--listen", "unix://"+sock, "--pprof-address", pprofAddr), prefix+"-mock")
	if err != nil {
		return nil, err
	}
	plugin.metricsAddr = pprofAddr
	defer plugin.stop()
	logPath := plugin.logPath
	cfg := filepath.Join(dir, "grpc.yaml")
	if err := os.WriteFile(cfg, []byte("endpoint: unix://"+sock+"\n"), 0o600); err != nil {
		return nil, err
	}
	d, err := startDaemon(ctx, c, daemonSpec{name: prefix, nodes: 1, kubeconfig: cl.info.Kubeconfig,
		provider: []string{"--provider", "grpc", "--provider-config", cfg}, measured: true})
	if err != nil {
		return nil, err
	}
	defer d.stop()
	if err := waitNodeReady(ctx, cl.client, prefix); err != nil {
		return nil, fmt.Errorf("plugin: node %s: %w (logs: %s, %s)", prefix, err, d.logPath, logPath)
	}
	ns, err := namespace(ctx, cl.client, prefix)
	if err != nil {
		return nil, err
	}
	defer cleanup(cl.client, ns, []string{prefix})
	dBefore, pBefore := d.usage(), plugin.usage()
	profiledDaemon, profiledPlugin := d.profileCPU(ctx, c, fmt.Sprintf("grpc-daemon-%d", n)), plugin.profileCPU(ctx, c, fmt.Sprintf("plugin-%d", n))
	pass, err := runPass(ctx, cl.client, ns, []string{prefix}, n, c.workers, newTracker(n), passHooks{phase: allPhases(apiServerProfiler(c, cl.client, "plugin", n),
		d.phaseProfiler(c, "grpc-daemon", n), plugin.phaseProfiler(c, "plugin", n))})
	profiledDaemon()
	profiledPlugin()
	if err != nil {
		return nil, fmt.Errorf("plugin: %w (logs: %s, %s)", err, d.logPath, logPath)
	}
	dAfter, pAfter := d.usage(), plugin.usage()
	r := &pluginResult{
		Pass:   pass,
		Daemon: processUsage{CPU: dAfter.CPU - dBefore.CPU, PeakRSS: dAfter.PeakRSS},
		Plugin: processUsage{CPU: pAfter.CPU - pBefore.CPU, PeakRSS: pAfter.PeakRSS},
		Stats:  d.metrics(ctx, cl.host),
	}
	logf("N=%d plugin: all Running in %s, all gone in %s", n, pass.AllRunning.Round(time.Millisecond), pass.AllGone.Round(time.Millisecond))
	return r, nil
}
