package daemon_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
)

// The provider of another module, as its author would write it: public
// packages only.
const (
	acmeProvider = `package acme

import (
	"context"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

func init() { provider.Register("acme", New) }

// New builds the provider; it is the mock under another name.
func New(ctx context.Context, cfg provider.InitConfig) (node.Provider, error) {
	return mock.New(ctx, cfg)
}
`
	acmeMain = `package main

import (
	"context"
	"os"

	_ "example.com/acme/acme"
	"github.com/vkubelet/virtual-kubelet/daemon"
)

func main() { os.Exit(daemon.Execute(context.Background(), os.Args[1:])) }
`
	// The end-to-end suite, which the provider's repository runs against
	// its node.
	acmeSuite = `package suite

import "github.com/vkubelet/virtual-kubelet/test/e2e"

// Suite is the suite for the acme node.
var Suite = e2e.NewEndToEndTestSuite(e2e.EndToEndTestSuiteConfig{NodeName: "acme-0"})
`
	// What the module must not be able to do: reach the daemon's
	// internal packages.
	internalImport = `package bad

import _ "github.com/vkubelet/virtual-kubelet/internal/commands"
`
)

// TestProviderInAnotherModule builds a binary in a module of its own whose
// provider registers itself with the daemon, and runs it: the provider is
// built in. The module also builds the end-to-end suite. The same module
// importing an internal package does not build, so the first builds prove
// the provider and the suite need none.
func TestProviderInAnotherModule(t *testing.T) {
	if testing.Short() {
		t.Skip("builds and links a daemon binary in a module of its own")
	}
	root, err := filepath.Abs("..")
	if err != nil {
		t.Fatal(err)
	}
	ours, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatal(err)
	}
	// The other module requires what ours does, at the same versions: its
	// pruned module graph is then ours, which the module cache holds once
	// ours was built. With only a require of ours, the go command would
	// read go.mod files deeper in the graph than our build ever did (a
	// fresh cache has not got them, and the build is offline).
	mod := strings.Replace(string(ours), "module github.com/vkubelet/virtual-kubelet", "module example.com/acme", 1)
	sum, err := os.ReadFile(filepath.Join(root, "go.sum"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	files := map[string]string{
		"go.mod": mod + "\nrequire github.com/vkubelet/virtual-kubelet v0.0.0\n\n" +
			"replace github.com/vkubelet/virtual-kubelet => " + root + "\n",
		"go.sum":       string(sum),
		"acme/acme.go": acmeProvider,
		"main.go":      acmeMain,
		"suite/e2e.go": acmeSuite,
		"bad/bad.go":   internalImport,
	}
	for name, content := range files {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	goCmd := func(args ...string) (string, error) {
		// Built as this test was (-race under make test), so the other
		// module's build reuses the packages this one's compiled.
		args = append(args[:1:1], append(childproc.BuildFlags(), args[1:]...)...)
		// The go command that built this test, which PATH need not hold.
		cmd := exec.Command(filepath.Join(runtime.GOROOT(), "bin", "go"), args...) //nolint:staticcheck // see above
		cmd.Dir = dir
		// Offline, from the module cache this module's own build filled.
		cmd.Env = append(os.Environ(), "GOWORK=off", childproc.GoFlagsEnv("-mod=mod"), "GOPROXY=off", "GOSUMDB=off", "GOTOOLCHAIN=local")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}

	bin := filepath.Join(dir, "acme-kubelet")
	if out, err := goCmd("build", "-o", bin, "."); err != nil {
		t.Fatalf("the other module's daemon does not build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "providers").CombinedOutput()
	if err != nil || strings.TrimSpace(string(out)) != "acme" {
		t.Errorf("acme-kubelet providers = %q, %v; want acme", out, err)
	}

	if out, err := goCmd("build", "./suite"); err != nil {
		t.Errorf("the other module cannot import the end-to-end suite: %v\n%s", err, out)
	}

	out2, err := goCmd("build", "./bad")
	if err == nil || !strings.Contains(out2, "use of internal package") {
		t.Errorf("a module importing the daemon's internal packages built (%v):\n%s", err, out2)
	}
}
