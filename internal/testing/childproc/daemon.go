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
// temporary directory, for tests that run it as a child process; remove
// deletes the directory.
func BuildDaemon() (path string, remove func(), err error) {
	dir, err := os.MkdirTemp("", "vk-binary-")
	if err != nil {
		return "", nil, err
	}
	remove = func() { _ = os.RemoveAll(dir) }
	path = filepath.Join(dir, "virtual-kubelet")
	build := exec.Command("go", "build", "-race", "-o", path, "github.com/vkubelet/virtual-kubelet/cmd/virtual-kubelet")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		remove()
		return "", nil, fmt.Errorf("building virtual-kubelet: %w", err)
	}
	return path, remove, nil
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
