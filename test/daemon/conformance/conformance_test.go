//go:build e2e

package conformance_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/test/e2e"
)

// TestMockConformance runs the importable e2e suite, as a provider's own
// repository would, against the mock on its node host: in process and out
// of process, behind --provider grpc. The mock keeps its pods in a state
// directory, so a restart of the daemon (and, in process, of the mock with
// it) adopts them. In process it has devices, so the DRA test runs.
func TestMockConformance(t *testing.T) {
	daemontest.ForEachTransport(t, func(t *testing.T, via daemontest.Transport) {
		c := testcluster.Shared(t)
		name := testcluster.UniqueName("vk")
		cfg := filepath.Join(t.TempDir(), "mock.json")
		// Two devices: in process the node publishes them and passes the
		// DRA test; behind the plugin boundary it has none, and skips it.
		devices := `[{"name": "gpu", "count": 2, "attributes": {"model": "h100"}}]`
		if err := os.WriteFile(cfg, []byte(fmt.Sprintf(`{%q: {"stateDir": %q, "devices": %s}}`, name, filepath.Join(t.TempDir(), "state"), devices)), 0o600); err != nil {
			t.Fatal(err)
		}
		d := via.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")), "--nodename", name, "--provider-config", cfg)
		e2e.NewEndToEndTestSuite(e2e.EndToEndTestSuiteConfig{
			RestConfig: c.Config,
			NodeName:   d.Name,
			// The mock's log is deterministic: "<namespace>/<pod>/<container> line <n>".
			WantLog: func(namespace, pod string) string { return namespace + "/" + pod + "/main line " },
			// The mock echoes on every port a container declares.
			EchoPort: 8080,
			Restart:  func(context.Context) error { return d.Restart() },
		}).Run(t)
	})
}
