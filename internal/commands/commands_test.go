package commands

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/provider"
)

func init() {
	provider.Register("fake", func(context.Context, provider.InitConfig) (node.Provider, error) { return nil, nil })
}

// run executes the command line in-process and returns exit code and output.
func run(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errOut bytes.Buffer
	code := execute(context.Background(), args, &out, &errOut)
	return code, out.String(), errOut.String()
}

func TestBadInputIsOneLine(t *testing.T) {
	dir := t.TempDir()
	unreadable := filepath.Join(dir, "nope.kubeconfig")
	garbage := filepath.Join(dir, "garbage.kubeconfig")
	if err := os.WriteFile(garbage, []byte("this: [is not: a kubeconfig"), 0o600); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		args []string
		want string
	}{
		{[]string{}, "--provider is required (known: fake"},
		{[]string{"--provider", "nope"}, `unknown provider "nope" (known: fake`},
		{[]string{"--provider", "fake", "--pod-sync-workers", "abc"}, `invalid argument "abc" for "--pod-sync-workers"`},
		{[]string{"--provider", "fake", "--pod-sync-workers", "0"}, "--pod-sync-workers must be at least 1"},
		{[]string{"--provider", "fake", "--nodename", "Not_Valid"}, `--nodename "Not_Valid" is not a valid node name`},
		{[]string{"--provider", "fake", "--taint-effect", "Sometimes"}, `--taint-effect "Sometimes"`},
		{[]string{"--provider", "fake", "--kube-api-content-type", "text/yaml"}, `--kube-api-content-type "text/yaml"`},
		{[]string{"--provider", "fake", "--listen-port", "70000"}, "--listen-port 70000 is not a port"},
		{[]string{"--provider", "fake", "--node-count", "0"}, "--node-count must be at least 1, got 0"},
		{[]string{"--provider", "fake", "--node-status-report-frequency", "0s"}, "--node-status-report-frequency must be positive, got 0s"},
		{[]string{"--provider", "fake", "--kube-api-max-in-flight", "-1"}, "--kube-api-max-in-flight must not be negative, got -1"},
		{[]string{"--provider", "fake", "--node-count", "3", "--listen-port", "65534"}, "--listen-port 65534 with --node-count 3 needs ports up to 65536"},
		{[]string{"--provider", "fake", "--node-count", "2", "--nodename", "a-very-long-prefix-" + strings.Repeat("x", 236)}, "is not a valid node name"},
		{[]string{"--provider", "fake", "--node-ip", "ten"}, `--node-ip "ten" is not an IP address`},
		{[]string{"--provider", "fake", "--log-level", "loud"}, `--log-level "loud"`},
		{[]string{"--provider", "fake", "--trace-exporter", "zipkin"}, `unknown exporter "zipkin"`},
		{[]string{"--provider", "fake", "--trace-sample-rate", "1.5"}, `--trace-sample-rate: "1.5"`},
		{[]string{"--provider", "fake", "--tls-cert-file", "x.crt"}, "--tls-cert-file and --tls-private-key-file go together"},
		{[]string{"--provider", "fake", "--authorization-mode", "RBAC"}, `--authorization-mode "RBAC"`},
		{[]string{"--provider", "fake", "--metrics-addr", "nowhere"}, `--metrics-addr "nowhere"`},
		{[]string{"--provider", "fake", "--enable-profiling", "--metrics-addr", ":10255"}, `--enable-profiling serves /debug/pprof without authentication: --metrics-addr ":10255" must be a loopback address`},
		{[]string{"--provider", "fake", "--enable-profiling", "--metrics-addr", "0.0.0.0:6060"}, `--metrics-addr "0.0.0.0:6060" must be a loopback address`},
		{[]string{"--provider", "fake", "--enable-profiling", "--metrics-addr", "metrics.example.com:6060"}, `--metrics-addr "metrics.example.com:6060" must be a loopback address`},
		{[]string{"--provider", "fake", "--leader-elect", "--leader-elect-renew-deadline", "15s"}, "--leader-elect-renew-deadline 15s plus --leader-elect-retry-period 2s must not exceed --leader-elect-lease-duration 15s"},
		{[]string{"--provider", "fake", "--leader-elect", "--leader-elect-renew-deadline", "14s"}, "must not exceed --leader-elect-lease-duration 15s"},
		{[]string{"--provider", "fake", "--leader-elect", "--leader-elect-lease-duration", "20s", "--leader-elect-retry-period", "9s"}, "--leader-elect-retry-period 9s must be under 8.333333333s"},
		{[]string{"--provider", "fake", "--leader-elect", "--leader-elect-lease-duration", "40s"}, "--leader-elect-lease-duration 40s plus --leader-elect-retry-period 2s must be under 30s"},
		{[]string{"--provider", "fake", "--leader-elect", "--leader-elect-retry-period", "0s"}, "--leader-elect-retry-period must be positive"},
		{[]string{"--provider", "fake", "--leader-elect", "--leader-elect-resource-namespace", "Kube_System"}, `--leader-elect-resource-namespace "Kube_System"`},
		{[]string{"--provider", "fake", "--leader-elect", "--nodename", strings.Repeat("x", 250)}, "makes holder lease name"},
		{[]string{"--provider", "fake", "--nodename", "vk", "--node-count", "30", "--metrics-addr", ":10255"}, `--metrics-addr ":10255" is on the kubelet API port of node vk-5 (--listen-port 10250 + 5)`},
		{[]string{"--provider", "fake", "--no-such-flag"}, "unknown flag: --no-such-flag"},
		{[]string{"--provider", "fake", "--stage-config", "stages.yaml"}, "--stage-config: kwok's Stages run in the mock provider only, not in --provider fake"},
		{[]string{"--provider", "fake", "--node-ip", "10.0.0.1", "--kubeconfig", unreadable}, "kubeconfig: stat " + unreadable},
		{[]string{"--provider", "fake", "--node-ip", "10.0.0.1", "--kubeconfig", garbage}, "kubeconfig " + garbage},
	}
	for _, c := range cases {
		code, _, stderr := run(t, c.args...)
		if code == 0 {
			t.Errorf("%v: exit 0", c.args)
			continue
		}
		if strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, c.want) || !strings.HasPrefix(stderr, "virtual-kubelet: ") {
			t.Errorf("%v:\n got %q\nwant one line containing %q", c.args, stderr, c.want)
		}
	}
}

// TestProfilingOnlyOnLoopback: /debug/pprof has no authentication, so it is
// served on loopback addresses only, the default one included.
func TestProfilingOnlyOnLoopback(t *testing.T) {
	for _, c := range []struct {
		args []string
		ok   bool
	}{
		{[]string{"--enable-profiling"}, true},
		{[]string{"--enable-profiling", "--metrics-addr", "[::1]:6060"}, true},
		{[]string{"--enable-profiling", "--metrics-addr", "localhost:6060"}, true},
		{[]string{"--enable-profiling", "--metrics-addr", "127.0.0.2:6060"}, true},
		{[]string{"--enable-profiling", "--metrics-addr", ":6060"}, false},
		{[]string{"--enable-profiling", "--metrics-addr", "[::]:6060"}, false},
		{[]string{"--enable-profiling", "--metrics-addr", "10.0.0.1:6060"}, false},
		{[]string{"--metrics-addr", ":10255"}, true}, // metrics alone, as an operator asks
	} {
		o := &Options{}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		for _, g := range o.flagGroups() {
			fs.AddFlagSet(g.fs)
		}
		if err := fs.Parse(append([]string{"--provider", "fake"}, c.args...)); err != nil {
			t.Fatal(err)
		}
		if err := o.Validate(); (err == nil) != c.ok {
			t.Errorf("%v: %v, want accepted %v", c.args, err, c.ok)
		}
	}
	if DefaultMetricsAddr != "127.0.0.1:10255" {
		t.Errorf("default --metrics-addr %s, want loopback", DefaultMetricsAddr)
	}
}

func TestEnvFallbacks(t *testing.T) {
	t.Setenv("KUBELET_PORT", "bogus")
	code, _, stderr := run(t, "--provider", "fake")
	if code == 0 || !strings.Contains(stderr, `KUBELET_PORT="bogus" (for --listen-port)`) {
		t.Errorf("bad env value: %q", stderr)
	}

	t.Setenv("KUBELET_PORT", "10251")
	t.Setenv("DEFAULT_NODE_NAME", "from-env")
	t.Setenv("VKUBELET_TAINT_EFFECT", "NoExecute")
	cmd := NewRootCommand()
	if err := cmd.ParseFlags([]string{"--nodename", "from-flag"}); err != nil {
		t.Fatal(err)
	}
	if err := applyEnv(cmd.Flags()); err != nil {
		t.Fatal(err)
	}
	get := func(name string) string { return cmd.Flags().Lookup(name).Value.String() }
	if get("listen-port") != "10251" || get("taint-effect") != "NoExecute" {
		t.Errorf("env not applied: port=%s effect=%s", get("listen-port"), get("taint-effect"))
	}
	if get("nodename") != "from-flag" {
		t.Errorf("a flag given on the command line must win over the environment, got %s", get("nodename"))
	}
}

func TestHelpGroupsFlags(t *testing.T) {
	code, out, _ := run(t, "--help")
	if code != 0 {
		t.Fatal("--help failed")
	}
	for _, want := range []string{"Provider flags:", "Node flags:", "Kubernetes API client flags:", "Kubelet API server flags:",
		"Logging and tracing flags:", "--trace-tag", "(env VKUBELET_POD_IP)", "providers"} {
		if !strings.Contains(out, want) {
			t.Errorf("--help lacks %q", want)
		}
	}
}

func TestVersionAndProviders(t *testing.T) {
	code, out, _ := run(t, "version")
	if code != 0 || !strings.HasPrefix(out, "virtual-kubelet v") || !strings.Contains(out, "kubelet API v1.36.3-vk.") {
		t.Errorf("version: %q", out)
	}
	code, out, _ = run(t, "providers")
	if code != 0 || !strings.Contains(out, "fake\n") {
		t.Errorf("providers: %q", out)
	}
}

// scaledOptions are the options args give, with the client limits scaled
// as the command does before it runs.
func scaledOptions(t *testing.T, args ...string) *Options {
	t.Helper()
	o := &Options{}
	fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
	for _, g := range o.flagGroups() {
		fs.AddFlagSet(g.fs)
	}
	if err := fs.Parse(args); err != nil {
		t.Fatal(err)
	}
	o.scaleClientLimits(fs)
	return o
}

// TestClientLimitsScaleWithNodes: N nodes of one process may talk to the
// API server as much as N kubelets, unless a limit was set.
func TestClientLimitsScaleWithNodes(t *testing.T) {
	for _, c := range []struct {
		args  []string
		qps   float32
		burst int
	}{
		{nil, DefaultKubeAPIQPS, DefaultKubeAPIBurst},
		{[]string{"--node-count", "1000"}, 50_000, 100_000},
		{[]string{"--node-count", "1000", "--kube-api-qps", "100"}, 100, 100_000},
		{[]string{"--node-count", "1000", "--kube-api-qps", "0"}, 0, 100_000}, // 0 stays "no limit"
	} {
		o := scaledOptions(t, c.args...)
		if o.Client.KubeAPIQPS != c.qps || o.Client.KubeAPIBurst != c.burst {
			t.Errorf("%v: qps %v burst %d, want %v and %d", c.args, o.Client.KubeAPIQPS, o.Client.KubeAPIBurst, c.qps, c.burst)
		}
	}
}
