//go:build e2e

package e2e_test

import (
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
	"github.com/vkubelet/virtual-kubelet/test/e2e"
)

// TestSlurmConformance runs the importable e2e suite against the slurm
// provider on a real Slurm, with the suite's default container (busybox,
// which the test config maps to the host). Busybox serves no port to
// forward to (no EchoPort); nothing else is skipped.
func TestSlurmConformance(t *testing.T) {
	n, _, ns := slurmtest.RunningNode(t)
	e2e.NewEndToEndTestSuite(e2e.EndToEndTestSuiteConfig{
		RestConfig: n.C.Config,
		Namespace:  ns,
		NodeName:   n.Name,
	}).Run(t)
}
