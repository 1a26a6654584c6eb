package main_test

import (
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/test/e2e"
)

// TestMockConformance runs the importable e2e suite, as a provider's own
// repository would, against the mock on its node host: in process and out
// of process, behind --provider grpc.
func TestMockConformance(t *testing.T) {
	forEachTransport(t, func(t *testing.T, via transport) {
		c := testcluster.Shared(t)
		d := via.start(t, c, c.AddHost(t, testcluster.UniqueName("h")))
		e2e.NewEndToEndTestSuite(e2e.EndToEndTestSuiteConfig{
			RestConfig: c.Config,
			NodeName:   d.name,
			// The mock's log is deterministic: "<namespace>/<pod>/<container> line <n>".
			WantLog: func(namespace, pod string) string { return namespace + "/" + pod + "/main line " },
		}).Run(t)
	})
}
