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

// jobStep is the arguments of srun for a step in pj's running job,
// overlapping its containers, followed by args.
func (p *Provider) jobStep(pj *podJob, args ...string) []string {
	p.mu.Lock()
	id := pj.jobID
	p.mu.Unlock()
	return append([]string{"--jobid=" + id, "--overlap", "--ntasks=1", "--quiet"}, args...)
}

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
	args := p.jobStep(pj)
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
		args = append(args, jobPath)
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
