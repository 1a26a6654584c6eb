//go:build e2e

package e2e_test

import (
	"context"
	"os"
	"os/exec"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/commands"
	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/test/e2e"
	"github.com/vkubelet/virtual-kubelet/test/e2e/internal/brokenproviders"
)

// The test binary doubles as the two children of TestSuiteNamesBrokenRules:
// with envDaemon set it is the virtual-kubelet daemon, with the fixtures
// compiled in; with envSuiteNode set it runs the suite (TestSuiteChild)
// against that node, so the suite can fail without failing this package.
const (
	envDaemon          = "VK_E2E_FIXTURE_DAEMON"
	envSuiteNode       = "VK_E2E_SUITE_NODE"
	envSuiteKubeconfig = "VK_E2E_SUITE_KUBECONFIG"
	envSuiteTests      = "VK_E2E_SUITE_TESTS"
)

func TestMain(m *testing.M) {
	switch {
	case os.Getenv(envDaemon) != "":
		brokenproviders.Register()
		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
		code := commands.Execute(ctx, os.Args[1:])
		stop()
		os.Exit(code)
	case os.Getenv(envSuiteNode) != "":
		// The parent's cluster is reached through its kubeconfig.
		os.Exit(m.Run())
	default:
		testcluster.Main(m)
	}
}

// TestSuiteNamesBrokenRules runs the suite against providers that each
// break one rule of the contract (package brokenproviders): the suite
// fails the test that checks the rule, with the rule in its message. The
// same harness with a provider that keeps the contract (the mock, polled
// for its statuses) passes, so the failures are the fixtures'.
func TestSuiteNamesBrokenRules(t *testing.T) {
	c := testcluster.Shared(t)
	cases := []struct {
		provider string
		tests    []string
		// failing is the test that must fail, naming rule; empty: the
		// suite must pass.
		failing, rule string
	}{
		{provider: brokenproviders.Polled, tests: []string{"TestGetPods", "TestPodLifecycleGracefulDelete", "TestPodDeleteWithinGrace", "TestExec"}},
		{provider: brokenproviders.NeverStops, tests: []string{"TestPodLifecycleGracefulDelete"}, failing: "TestPodLifecycleGracefulDelete", rule: e2e.RuleDeleteForgets},
		{provider: brokenproviders.IgnoresGrace, tests: []string{"TestPodDeleteWithinGrace"}, failing: "TestPodDeleteWithinGrace", rule: e2e.RuleGrace},
		{provider: brokenproviders.SharedStatus, tests: []string{"TestGetPods"}, failing: "TestGetPods", rule: e2e.RuleStatusReported},
		{provider: brokenproviders.CannotPrepare, tests: []string{"TestDynamicResourceAllocation"}, failing: "TestDynamicResourceAllocation", rule: e2e.RuleDevices},
	}
	for _, tc := range cases {
		t.Run(tc.provider, func(t *testing.T) {
			t.Parallel()
			name := startFixtureDaemon(t, c, tc.provider)
			out, err := runSuiteChild(t, c, name, tc.tests)
			switch {
			case tc.failing == "" && err != nil:
				t.Errorf("the suite failed against %s, which keeps the contract: %v\n%s", tc.provider, err, out)
			case tc.failing == "":
				if !strings.Contains(out, "--- PASS: TestSuiteChild") {
					t.Errorf("the suite did not report a pass:\n%s", out)
				}
			case err == nil:
				t.Errorf("the suite passed against %s, which breaks %q\n%s", tc.provider, tc.rule, out)
			case !strings.Contains(out, "--- FAIL: TestSuiteChild/"+tc.failing) || !strings.Contains(out, tc.rule):
				t.Errorf("against %s the suite must fail %s naming %q; it said:\n%s", tc.provider, tc.failing, tc.rule, out)
			default:
				t.Logf("the suite failed %s as it must:\n%s", tc.failing, linesWith(out, tc.rule))
			}
		})
	}
}

// linesWith are the lines of out that contain s.
func linesWith(out, s string) string {
	var b strings.Builder
	for line := range strings.Lines(out) {
		if strings.Contains(line, s) {
			b.WriteString(strings.TrimSpace(line) + "\n")
		}
	}
	return b.String()
}

// startFixtureDaemon runs this binary as the daemon of a new node with
// --provider fixture, in a node host, and returns the node's name.
func startFixtureDaemon(t *testing.T, c *testcluster.Cluster, fixture string) string {
	t.Helper()
	host := c.AddHost(t, testcluster.UniqueName("h"))
	name, addr := testcluster.UniqueName("vk"), host.Addr.String()
	cmd := host.Command(context.Background(), os.Args[0], "--provider", fixture, "--nodename", name,
		"--kubeconfig", c.Info.NodeKubeconfig, "--node-ip", addr, "--listen-address", addr, "--metrics-addr", "")
	cmd.Env = append(os.Environ(), envDaemon+"=1")
	output := &childproc.Output{}
	cmd.Stdout, cmd.Stderr = output, output
	d, err := childproc.Start(cmd)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Stop(20 * time.Second)
		_ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{})
		if t.Failed() {
			t.Logf("daemon output:\n%s", output.String())
		}
	})
	return name
}

// runSuiteChild runs TestSuiteChild in a child of this binary against the
// node, and returns its output and exit error.
func runSuiteChild(t *testing.T, c *testcluster.Cluster, node string, tests []string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run", "^TestSuiteChild$", "-test.v", "-test.count", "1")
	cmd.Env = append(os.Environ(), envSuiteNode+"="+node, envSuiteKubeconfig+"="+c.Info.Kubeconfig, envSuiteTests+"="+strings.Join(tests, ","))
	out, err := cmd.CombinedOutput()
	if ctx.Err() != nil {
		t.Fatalf("the suite did not end within 5 minutes:\n%s", out)
	}
	return string(out), err
}

// TestSuiteChild is the suite as TestSuiteNamesBrokenRules runs it in a
// child; it is skipped otherwise.
func TestSuiteChild(t *testing.T) {
	node := os.Getenv(envSuiteNode)
	if node == "" {
		t.Skip("run by TestSuiteNamesBrokenRules")
	}
	tests := strings.Split(os.Getenv(envSuiteTests), ",")
	e2e.NewEndToEndTestSuite(e2e.EndToEndTestSuiteConfig{
		Kubeconfig:     os.Getenv(envSuiteKubeconfig),
		NodeName:       node,
		WatchTimeout:   30 * time.Second,
		WantLog:        func(namespace, pod string) string { return namespace + "/" + pod + "/main line " },
		EchoPort:       8080,
		ShouldSkipTest: func(name string) bool { return !slices.Contains(tests, name) },
	}).Run(t)
}
