// Command cluster brings a local control plane up and down for `make
// cluster-up`, `make cluster-down` and `make run`, and runs commands in node
// hosts (network namespaces the apiserver can proxy to).
//
//	cluster up   [--dir D] [--bin-dir B] [--node-network=true] [--metrics-server BIN]
//	cluster down [--dir D]
//	cluster exec [--dir D] HOST -- COMMAND [ARGS...]
//	cluster restart [--dir D] COMPONENT
//
// `up` starts a detached supervisor (`cluster serve`) that owns the component
// processes and the node network; `down` stops it and removes the directory.
// `restart` asks the supervisor to stop one component and start it again
// (`make soak` restarts kube-apiserver that way) and returns once it is
// healthy.
// With --metrics-server (hack/metrics-server/build.sh prints the binary),
// metrics-server runs too, behind the aggregation layer, so that `kubectl
// top` and HorizontalPodAutoscalers work; it needs the node network.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"time"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
)

func defaultDir() string {
	return filepath.Join(os.TempDir(), "virtual-kubelet", "local")
}

func main() {
	if len(os.Args) < 2 {
		usage()
	}
	var err error
	switch cmd, args := os.Args[1], os.Args[2:]; cmd {
	case "up":
		err = up(args)
	case "serve":
		err = serve(args)
	case "down":
		err = down(args)
	case "exec":
		err = execIn(args)
	case "restart":
		err = restart(args)
	default:
		usage()
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "cluster:", err)
		os.Exit(1)
	}
}

func usage() {
	fmt.Fprintln(os.Stderr, "usage: cluster up|down|exec|restart [flags]; see hack/cluster/main.go")
	os.Exit(2)
}

type flags struct {
	fs            *flag.FlagSet
	dir           string
	binDir        string
	nodeNetwork   bool
	metricsServer string
}

func parse(name string, args []string) (*flags, []string, error) {
	f := &flags{fs: flag.NewFlagSet(name, flag.ContinueOnError)}
	f.fs.StringVar(&f.dir, "dir", defaultDir(), "directory for the cluster's PKI, data, kubeconfigs and logs")
	f.fs.StringVar(&f.binDir, "bin-dir", os.Getenv("VK_CONTROLPLANE_BIN"), "directory with etcd, kube-apiserver, ... (hack/controlplane/build.sh prints it)")
	f.fs.BoolVar(&f.nodeNetwork, "node-network", nethost.Available() == nil, "create a node network so daemons in node hosts can be proxied to (needs root)")
	f.fs.StringVar(&f.metricsServer, "metrics-server", os.Getenv("VK_METRICS_SERVER_BIN"), "metrics-server binary to run for kubectl top (hack/metrics-server/build.sh prints it); empty: none")
	if err := f.fs.Parse(args); err != nil {
		return nil, nil, err
	}
	abs, err := filepath.Abs(f.dir)
	f.dir = abs
	return f, f.fs.Args(), err
}

// running returns the Info of a live cluster in dir, or nil.
func running(dir string) *controlplane.Info {
	info, err := controlplane.LoadInfo(dir)
	if err != nil || syscall.Kill(info.Pid, 0) != nil {
		return nil
	}
	return info
}

func up(args []string) error {
	f, _, err := parse("up", args)
	if err != nil {
		return err
	}
	if info := running(f.dir); info != nil {
		printInfo(info, "already running")
		return nil
	}
	if f.binDir == "" {
		return errors.New("--bin-dir (or $VK_CONTROLPLANE_BIN) is required: run hack/controlplane/build.sh")
	}
	if f.metricsServer != "" && !f.nodeNetwork {
		fmt.Fprintln(os.Stderr, "no node network (it needs root), so no metrics-server: kubectl top will not work")
		f.metricsServer = ""
	}
	// Leftovers of a supervisor that died are not worth keeping.
	if err := cleanup(f.dir); err != nil {
		return err
	}
	if err := os.MkdirAll(f.dir, 0o700); err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	logPath := filepath.Join(f.dir, "supervisor.log")
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	cmd := exec.Command(self, "serve", "--dir", f.dir, "--bin-dir", f.binDir, fmt.Sprintf("--node-network=%t", f.nodeNetwork),
		"--metrics-server", f.metricsServer)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	fmt.Fprintf(os.Stderr, "starting control plane in %s ...\n", f.dir)
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case err := <-exited:
			tail, _ := os.ReadFile(logPath)
			return fmt.Errorf("control plane failed to start (%v):\n%s", err, tail)
		case <-tick.C:
			if info := running(f.dir); info != nil {
				printInfo(info, "up")
				return nil
			}
		}
	}
}

func printInfo(info *controlplane.Info, state string) {
	fmt.Printf("control plane %s (%s)\n", state, info.Server)
	fmt.Printf("  export KUBECONFIG=%s\n", info.Kubeconfig)
	fmt.Printf("  kubectl:  %s\n", filepath.Join(info.BinDir, "kubectl"))
	if info.NodeNetwork != nil {
		fmt.Printf("  node network %s, apiserver at %s for node hosts\n", info.NodeNetwork.Subnet, info.NodeServer)
	}
	if info.MetricsServer != "" {
		fmt.Printf("  metrics-server at %s (kubectl top)\n", info.MetricsServer)
	}
	fmt.Printf("  logs:     %s\n", filepath.Join(info.Dir, "logs"))
}

// serve is the supervisor: it runs the control plane until SIGTERM/SIGINT.
func serve(args []string) error {
	f, _, err := parse("serve", args)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	cfg := controlplane.Config{Dir: f.dir, BinDir: f.binDir, MetricsServerBin: f.metricsServer}
	if f.nodeNetwork {
		n, err := nethost.CreateNetwork(ctx, -1)
		if err != nil {
			return err
		}
		defer func() { _ = n.Delete(context.Background()) }()
		cfg.NodeNetwork = n
	}
	cp, err := controlplane.Start(ctx, cfg)
	if err != nil {
		return err
	}
	ctl, err := serveControl(ctx, f.dir, cp)
	if err != nil {
		cp.Stop()
		return err
	}
	fmt.Println("control plane ready")
	<-ctx.Done()
	fmt.Println("stopping control plane")
	ctl.close()
	cp.Stop()
	return nil
}

func down(args []string) error {
	f, _, err := parse("down", args)
	if err != nil {
		return err
	}
	if info, err := controlplane.LoadInfo(f.dir); err == nil {
		if syscall.Kill(info.Pid, syscall.SIGTERM) == nil {
			deadline := time.Now().Add(30 * time.Second)
			for syscall.Kill(info.Pid, 0) == nil && time.Now().Before(deadline) {
				time.Sleep(100 * time.Millisecond)
			}
		}
	}
	if err := cleanup(f.dir); err != nil {
		return err
	}
	fmt.Printf("control plane in %s is down and its data removed\n", f.dir)
	return nil
}

// cleanup removes what a dead supervisor may have left: its node network and
// the directory.
func cleanup(dir string) error {
	if info, err := controlplane.LoadInfo(dir); err == nil && info.NodeNetwork != nil {
		_ = info.NodeNetwork.Delete(context.Background())
	}
	return os.RemoveAll(dir)
}

// execIn runs a command in the named node host, creating the host if needed,
// with VKUBELET_POD_IP and KUBECONFIG set for a daemon that runs there.
func execIn(args []string) error {
	f, rest, err := parse("exec", args)
	if err != nil {
		return err
	}
	if len(rest) < 2 || rest[1] != "--" || len(rest) < 3 {
		return errors.New("usage: cluster exec [--dir D] HOST -- COMMAND [ARGS...]")
	}
	name, command := rest[0], rest[2:]
	info := running(f.dir)
	if info == nil {
		return fmt.Errorf("no control plane is running in %s: run `make cluster-up`", f.dir)
	}
	if info.NodeNetwork == nil {
		return errors.New("the control plane has no node network (it needs root)")
	}
	ctx := context.Background()
	host, err := info.NodeNetwork.Host(ctx, name)
	if err != nil {
		if host, err = info.NodeNetwork.AddHost(ctx, name); err != nil {
			return err
		}
	}
	env := []string{"VKUBELET_POD_IP=" + host.Addr.String(), "KUBECONFIG=" + info.NodeKubeconfig}
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "VKUBELET_POD_IP=") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	ipPath, err := exec.LookPath("ip")
	if err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "running in node host %s (%s): %s\n", name, host.Addr, strings.Join(command, " "))
	return syscall.Exec(ipPath, append([]string{"ip", "netns", "exec", host.Namespace}, command...), env)
}
