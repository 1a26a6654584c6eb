package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// containerOf finds a pod's job and the spec of one of its containers.
func (p *Provider) containerOf(namespace, podName, containerName string) (*podJob, *corev1.Container, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pj, ok := p.pods[podKey(namespace, podName)]
	if !ok {
		return nil, nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, podName)
	}
	for _, list := range [][]corev1.Container{pj.pod.Spec.InitContainers, pj.pod.Spec.Containers} {
		for i := range list {
			if list[i].Name == containerName {
				return pj, &list[i], nil
			}
		}
	}
	return nil, nil, errdefs.NotFoundf("pod %s/%s has no container %q", namespace, podName, containerName)
}

// followPoll is how often a followed log is read again at its end.
const followPoll = 200 * time.Millisecond

// GetContainerLogs reads the container's output file: the last opts.Tail
// lines, and with opts.Follow what it writes next, until it exits.
// Timestamps and since are not kept by the file: they are ignored.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	pj, _, err := p.containerOf(namespace, podName, containerName)
	if err != nil {
		return nil, err
	}
	dir := filepath.Join(pj.dir, "c", containerName)
	f, err := os.Open(filepath.Join(dir, "log"))
	if errors.Is(err, os.ErrNotExist) {
		return io.NopCloser(strings.NewReader("")), nil
	}
	if err != nil {
		return nil, err
	}
	if opts.Tail >= 0 {
		off, err := tailOffset(f, opts.Tail)
		if err == nil {
			_, err = f.Seek(off, io.SeekStart)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	if !opts.Follow {
		return f, nil
	}
	exited := func() bool {
		_, err := os.Stat(filepath.Join(dir, "exit"))
		return err == nil
	}
	return &follower{ctx: ctx, f: f, done: exited}, nil
}

// tailOffset is where the last n lines of f start.
func tailOffset(f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := st.Size()
	if n == 0 {
		return end, nil
	}
	buf := make([]byte, 32<<10)
	pos, seen := end, 0
	for pos > 0 {
		size := int64(len(buf))
		if pos < size {
			size = pos
		}
		pos -= size
		chunk := buf[:size]
		if _, err := f.ReadAt(chunk, pos); err != nil {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			// The final newline ends the last line; it does not start one.
			if chunk[i] == '\n' && pos+int64(i) != end-1 {
				if seen++; seen == n {
					return pos + int64(i) + 1, nil
				}
			}
		}
	}
	return 0, nil
}

// follower reads a log file and, at its end, waits for more until the
// container exits or the request ends.
type follower struct {
	ctx  context.Context
	f    *os.File
	done func() bool
}

func (r *follower) Read(b []byte) (int, error) {
	for {
		// The exit check comes first: what was written before the exit is
		// read before EOF is returned.
		exited := r.done()
		n, err := r.f.Read(b)
		if n > 0 || !errors.Is(err, io.EOF) || exited {
			return n, err
		}
		select {
		case <-r.ctx.Done():
			return 0, io.EOF
		case <-time.After(followPoll):
		}
	}
}

func (r *follower) Close() error { return r.f.Close() }

// childPID is the pid of the container's process, from bwrap's info file.
var childPID = regexp.MustCompile(`"child-pid":\s*([0-9]+)`)

// RunInContainer runs cmd in the container's mount namespace, on the node
// running the job: srun --overlap joins the job, nsenter the container. The
// command and its arguments stay argv elements all the way.
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	pj, c, err := p.containerOf(namespace, podName, containerName)
	if err != nil {
		return err
	}
	if len(cmd) == 0 || strings.Contains(cmd[0], "=") {
		return errdefs.InvalidInputf("exec: the command %q must be a program name or path without '='", cmd)
	}
	info, err := os.ReadFile(filepath.Join(pj.dir, "c", containerName, "info"))
	m := childPID.FindSubmatch(info)
	if err != nil || m == nil {
		return fmt.Errorf("container %q of pod %s/%s is not running", containerName, namespace, podName)
	}
	p.mu.Lock()
	id := pj.jobID
	p.mu.Unlock()
	args := []string{"--jobid=" + id, "--overlap", "--ntasks=1", "--quiet"}
	if attach.TTY() {
		args = append(args, "--pty")
	}
	args = append(args, "/usr/bin/nsenter", "--target="+string(m[1]), "--mount", "--root", "--wd", "--", "/usr/bin/env", "-i")
	hasPath := false
	for _, e := range c.Env {
		args = append(args, e.Name+"="+e.Value)
		hasPath = hasPath || e.Name == "PATH"
	}
	if !hasPath {
		args = append(args, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	run := p.cli.command(ctx, "srun", append(args, cmd...)...)
	var stderr bytes.Buffer
	run.Stdin = attach.Stdin()
	if w := attach.Stdout(); w != nil {
		run.Stdout = w
	}
	run.Stderr = &stderr
	if w := attach.Stderr(); w != nil {
		run.Stderr = io.MultiWriter(w, &stderr)
	}
	err = run.Run()
	var exitErr *exec.ExitError
	if errors.As(err, &exitErr) {
		return utilexec.CodeExitError{Err: fmt.Errorf("command terminated with exit code %d", exitErr.ExitCode()), Code: exitErr.ExitCode()}
	}
	return err
}

// PortForward connects the stream to the port on the node running the
// pod's job: containers share the node's network.
func (p *Provider) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	defer stream.Close()
	p.mu.Lock()
	pj, ok := p.pods[podKey(namespace, podName)]
	var host string
	if ok && pj.job != nil {
		host = pj.job.BatchHost
	}
	p.mu.Unlock()
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not on this node", namespace, podName)
	}
	if host == "" {
		return fmt.Errorf("pod %s/%s is not running on a Slurm node", namespace, podName)
	}
	addr, err := p.nodeAddress(ctx, host)
	if err != nil {
		return err
	}
	var d net.Dialer
	conn, err := d.DialContext(ctx, "tcp", net.JoinHostPort(addr, strconv.Itoa(int(port))))
	if err != nil {
		return err
	}
	defer conn.Close()
	errc := make(chan error, 2)
	go func() { _, err := io.Copy(conn, stream); errc <- err }()
	go func() { _, err := io.Copy(stream, conn); errc <- err }()
	select {
	case err = <-errc:
	case <-ctx.Done():
	}
	return err
}

// nodeAddress is the address of a Slurm node, from sinfo.
func (p *Provider) nodeAddress(ctx context.Context, name string) (string, error) {
	nodes, err := p.cli.sinfo(ctx)
	if err != nil {
		return "", err
	}
	for _, n := range nodes {
		if n.Name == name && n.Address != "" {
			return n.Address, nil
		}
	}
	return "", fmt.Errorf("slurm node %q has no address in sinfo", name)
}
