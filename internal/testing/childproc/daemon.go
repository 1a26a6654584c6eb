package childproc

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
)

// BuildDaemon builds the virtual-kubelet binary with -race into a new
// temporary directory, beside the slurm provider's container launcher, for
// tests that run it as a child process; remove deletes the directory.
func BuildDaemon() (path string, remove func(), err error) {
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

// Build builds virtual-kubelet into dir with the go build flags given, and
// the slurm provider's container launcher beside it without them: a job
// runs the launcher for every container, and it replaces itself with
// bubblewrap at once.
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
