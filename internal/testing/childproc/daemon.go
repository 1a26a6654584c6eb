package childproc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// EnvDaemon names a virtual-kubelet binary, built with -race and with the
// slurm container launcher beside it (as Build does), that BuildDaemon
// returns instead of building one: `make test` builds it once for all e2e
// packages.
const EnvDaemon = "VK_TEST_DAEMON"

// BuildDaemon builds the virtual-kubelet binary with -race into a new
// temporary directory, beside the slurm provider's container launcher, for
// tests that run it as a child process; remove deletes the directory. With
// $VK_TEST_DAEMON set it returns that binary and remove does nothing.
func BuildDaemon() (path string, remove func(), err error) {
	if path := os.Getenv(EnvDaemon); path != "" {
		if _, err := os.Stat(path); err != nil {
			return "", nil, fmt.Errorf("$%s: %w", EnvDaemon, err)
		}
		return path, func() {}, nil
	}
	dir, err := os.MkdirTemp("", "vk-binary-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { _ = os.RemoveAll(dir) }
	if err := Build(dir, "-race"); err != nil {
		remove()
		return "", nil, err
	}
	return filepath.Join(dir, "virtual-kubelet"), remove, nil
}

// BuildFlags are the go build flags a test's child `go build` should use
// to compile as the test itself was compiled: -race under `go test -race`.
// The child then reuses every package the test's own build compiled, where
// without -race it would compile the whole graph once more (minutes on a
// fresh machine).
func BuildFlags() []string {
	if raceBuild {
		return []string{"-race"}
	}
	return nil
}

// GoFlagsEnv is the GOFLAGS entry of a child go command's environment that
// needs more flags than it inherits (-mod=mod, say): the inherited ones
// (make test's compiler flags) are kept, or the child would compile the
// whole graph once more instead of reusing the test's packages.
func GoFlagsEnv(more ...string) string {
	return "GOFLAGS=" + strings.TrimSpace(os.Getenv("GOFLAGS")+" "+strings.Join(more, " "))
}

// Build builds virtual-kubelet into dir with the go build flags given, and
// the slurm provider's container launcher beside it without them: the
// launcher is the whole of each Slurm job, so the race detector's cost
// there would be every pod's.
func Build(dir string, flags ...string) error {
	for _, b := range []struct {
		pkg   string
		flags []string
	}{
		{"github.com/vkubelet/virtual-kubelet/cmd/virtual-kubelet", flags},
		{"github.com/vkubelet/virtual-kubelet/providers/slurm/cmd/virtual-kubelet-slurm-container", nil},
	} {
		build := exec.Command("go", append(append([]string{"build"}, b.flags...), "-o", dir+"/", b.pkg)...)
		build.Stdout, build.Stderr = os.Stderr, os.Stderr
		if err := build.Run(); err != nil {
			return fmt.Errorf("building %s: %w", filepath.Base(b.pkg), err)
		}
	}
	return nil
}

// Output collects a process's output, safe to read while it writes.
type Output struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (o *Output) Write(p []byte) (int, error) {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.Write(p)
}

// String is what was written so far.
func (o *Output) String() string {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.b.String()
}
