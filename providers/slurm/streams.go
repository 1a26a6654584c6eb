package slurm

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"syscall"

	corev1 "k8s.io/api/core/v1"
	utilexec "k8s.io/utils/exec"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
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
// overlapping its containers, followed by args, and the user the step
// runs as: the tenant's, so Slurm lets it into the pod's job and no other.
func (p *Provider) jobStep(pj *podJob, args ...string) (*syscall.Credential, []string) {
	p.mu.Lock()
	id := pj.jobID
	p.mu.Unlock()
	return pj.tenant.cred, append([]string{"--jobid=" + id, "--overlap", "--ntasks=1", "--quiet"}, args...)
}

// childPID is the pid of the container's process, from bwrap's info file.
var childPID = regexp.MustCompile(`"child-pid":\s*([0-9]+)`)

// RunInContainer runs cmd in the container, on the node running the job,
// as the tenant: srun --overlap joins the job, nsenter enters every
// namespace of the container (user, mount, PID, IPC, UTS, cgroup), and
// the command runs with the container's uid and no capabilities. The
// container's environment reaches it through srun's environment, never an
// argv: ps shows every process's arguments to every user.
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	pj, c, err := p.containerOf(namespace, podName, containerName)
	if err != nil {
		return err
	}
	if len(cmd) == 0 {
		return errdefs.InvalidInput("exec: no command")
	}
	info, err := sandbox.ReadPodFile(pj.dir, "c", containerName, "info")
	m := childPID.FindSubmatch(info)
	if err != nil || m == nil {
		return fmt.Errorf("container %q of pod %s/%s is not running", containerName, namespace, podName)
	}
	env, names, err := execEnv(c.Env)
	if err != nil {
		return err
	}
	cred, args := p.jobStep(pj, "--export="+names)
	if attach.TTY() {
		args = append(args, "--pty")
	}
	args = append(args, "/usr/bin/nsenter", "--target="+string(m[1]), "--user", "--mount", "--pid", "--ipc", "--uts", "--cgroup",
		"--preserve-credentials", "--root", "--wd", "--")
	run := p.cli.command(ctx, cred, "srun", append(args, cmd...)...)
	run.Env = append(append(run.Env, env...), p.cli.slurmEnv()...)
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

// execEnv is the container's environment for an exec (PATH added when the
// container sets none) and the names srun --export passes on. A name srun
// cannot list (one with a comma) is refused.
func execEnv(vars []corev1.EnvVar) (env []string, names string, err error) {
	var list []string
	hasPath := false
	for _, e := range vars {
		if strings.Contains(e.Name, ",") {
			return nil, "", errdefs.InvalidInputf("exec: environment variable name %q has a comma, which srun --export cannot pass", e.Name)
		}
		env = append(env, e.Name+"="+e.Value)
		list = append(list, e.Name)
		hasPath = hasPath || e.Name == "PATH"
	}
	if !hasPath {
		env = append(env, sandbox.JobPath)
		list = append(list, "PATH")
	}
	return env, strings.Join(list, ","), nil
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
