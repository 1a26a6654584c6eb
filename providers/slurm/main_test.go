package slurm

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

// teardown runs after the package's tests: the e2e tests' Slurm is stopped
// there.
var teardown []func()

func TestMain(m *testing.M) {
	// The tests' configs name this test binary as the container launcher
	// (writeConfig): installed under the launcher's name and run by a job,
	// it is the launcher.
	if filepath.Base(os.Args[0]) == LauncherName {
		os.Exit(sandbox.Main(os.Args[1:]))
	}
	code := m.Run()
	for _, f := range teardown {
		f()
	}
	os.Exit(code)
}
