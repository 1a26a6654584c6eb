package commands

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"go.uber.org/goleak"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

func init() { provider.Register("mock", mock.New) }

// An early return (here --startup-timeout, with an API server that never
// answers) stops the node and everything else Run started before it returns.
func TestRunLeavesNoGoroutinesOnEarlyReturn(t *testing.T) {
	before := goleak.IgnoreCurrent()

	kubeconfig := filepath.Join(t.TempDir(), "kubeconfig")
	cfg := fmt.Sprintf(`apiVersion: v1
kind: Config
clusters: [{name: c, cluster: {server: "http://127.0.0.1:%d"}}]
users: [{name: u, user: {token: t}}]
contexts: [{name: c, context: {cluster: c, user: u}}]
current-context: c
`, freeport.Get(t))
	if err := os.WriteFile(kubeconfig, []byte(cfg), 0o600); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := run(t, "--provider", "mock", "--kubeconfig", kubeconfig, "--nodename", "leak-test",
		"--node-ip", "127.0.0.1", "--listen-address", "127.0.0.1", "--listen-port", strconv.Itoa(freeport.Get(t)),
		"--metrics-addr", "", "--startup-timeout", "1s", "--log-level", "error")
	if code == 0 || !strings.Contains(stderr, "did not come up within --startup-timeout 1s") {
		t.Fatalf("exit %d, stderr %q; want the startup timeout", code, stderr)
	}
	goleak.VerifyNone(t, before)
}

// One node watches its own pods (spec.nodeName=NODE), as a kubelet does,
// unless --shared-pod-watch makes the process watch all bound pods once, as
// many nodes or replicas do.
func TestSharedPodWatchIsChosenByFlag(t *testing.T) {
	for _, tc := range []struct {
		name   string
		set    func(*Options)
		shared bool
	}{
		{"one node", func(*Options) {}, false},
		{"--shared-pod-watch", func(o *Options) { o.Node.SharedPodWatch = true }, true},
		{"--node-count 2", func(o *Options) { o.Node.NodeCount = 2 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := &Options{}
			o.Node.NodeCount = 1
			tc.set(o)
			ctx, cancel := context.WithCancel(t.Context())
			sh, err := startShared(ctx, o, fake.NewClientset(), nil)
			if err != nil {
				cancel()
				t.Fatal(err)
			}
			defer sh.stop() // after the cancel: the factories wait for their informers
			defer cancel()
			if got := sh.pods != nil; got != tc.shared {
				t.Fatalf("shared pod watch: %v, want %v", got, tc.shared)
			}
		})
	}
}
