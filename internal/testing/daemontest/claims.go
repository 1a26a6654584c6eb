package daemontest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// ClaimTemplate is a ResourceClaimTemplate's manifest, as a user writes
// one (docs/devices.md): each claim made from it asks for exactly one
// device of the DeviceClass class, and, when selector is not empty, one
// for which that CEL expression holds.
func ClaimTemplate(name, class, selector string) string {
	m := fmt.Sprintf(`apiVersion: resource.k8s.io/v1
kind: ResourceClaimTemplate
metadata:
  name: %s
spec:
  spec:
    devices:
      requests:
      - name: gpu
        exactly:
          deviceClassName: %s
`, name, class)
	if selector != "" {
		m += fmt.Sprintf(`          selectors:
          - cel:
              expression: %s
`, selector)
	}
	return m
}

// Apply applies the manifests with kubectl, in namespace ns (the
// manifests' own when ""), as a user applies a file.
func Apply(t *testing.T, c *testcluster.Cluster, ns string, manifests ...string) {
	t.Helper()
	file := filepath.Join(t.TempDir(), "manifest.yaml")
	if err := os.WriteFile(file, []byte(strings.Join(manifests, "---\n")), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"apply", "-f", file}
	if ns != "" {
		args = append([]string{"-n", ns}, args...)
	}
	Kubectl(t, c, args...)
}

// ApplyFile applies the manifest file with kubectl and deletes what it
// names when the test ends: cluster-wide objects of the test's own, such
// as a DeviceClass by a unique name, which no test namespace's deletion
// removes.
func ApplyFile(t *testing.T, c *testcluster.Cluster, file string) {
	t.Helper()
	Kubectl(t, c, "apply", "-f", file)
	t.Cleanup(func() { _, _ = c.Kubectl(context.Background(), "delete", "--ignore-not-found", "-f", file) })
}

// ApplyShipped applies a manifest the repository ships (hack/deploy) and
// leaves its objects: e2e packages share the cluster and run side by side,
// and the shipped cluster-wide objects (the DeviceClasses) are the same
// for all of them, so one test's cleanup would take them from another
// mid-test.
func ApplyShipped(t *testing.T, c *testcluster.Cluster, file string) {
	t.Helper()
	Kubectl(t, c, "apply", "-f", file)
}
