package slurm

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

// AttachToContainer implements node.AttachProvider. The output is the
// container's log followed from its end, each record to its stream (both to
// stdout for a TTY session); the session ends when the
// container exits or the client goes. The input, for a container with
// stdin: true, goes into the fifo the job keeps as its standard input,
// written on the job's node by dd under srun --overlap; with stdinOnce the
// container's stdin is closed once the first attach's input ends, as a
// kubelet closes it. A container with tty: true runs on a terminal of its
// own (script(1), started by the job), whose output is all stdout; its size stays the default:
// resizes are ignored. A container that has not started or has exited
// cannot be attached to.
func (p *Provider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	pj, c, err := p.containerOf(namespace, podName, containerName)
	if err != nil {
		return err
	}
	if f := readContainerFiles(pj.dir, containerName); f.started.IsZero() || !f.finished.IsZero() {
		return fmt.Errorf("container %q of pod %s/%s is not running", containerName, namespace, podName)
	}
	dir := filepath.Join(pj.dir, "c", containerName)
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer func() { cancel(); wg.Wait() }()
	rs, err := openLog(ctx, dir, 0, true)
	if err != nil {
		return err
	}
	defer rs.Close()
	if in := attach.Stdin(); in != nil && c.Stdin {
		wg.Add(1)
		go func() {
			defer wg.Done()
			p.writeStdin(ctx, pj, dir, c.StdinOnce, in)
		}()
	}
	stdout, stderr := attach.Stdout(), attach.Stderr()
	if stderr == nil && attach.TTY() {
		stderr = stdout
	}
	for {
		rec, err := rs.next()
		if errors.Is(err, io.EOF) {
			return nil
		}
		if err != nil {
			return err
		}
		w := stdout
		if rec.stderr {
			w = stderr
		}
		if w == nil {
			continue
		}
		if _, err := w.Write(rec.text); err != nil {
			return err
		}
	}
}

// stdinWaitDelay bounds how long an ended srun's input copy is waited for:
// the client's stdin may never return from a read.
const stdinWaitDelay = time.Second

// writeStdin copies in to the container's stdin fifo (dir/in) until in ends
// or ctx does. With once, the first call takes the holder of the fifo's
// write end (renaming in.holder to in.once, which only one call can) and
// stops it after copying, so the container reads end of file; later calls
// write nothing.
func (p *Provider) writeStdin(ctx context.Context, pj *podJob, dir string, once bool, in io.Reader) {
	holder := filepath.Join(dir, "in.holder")
	if once {
		taken := filepath.Join(dir, "in.once")
		if err := os.Rename(holder, taken); err != nil {
			log.G(ctx).Debugf("attach: the stdin of %s was taken by an earlier attach: %v", dir, err)
			return
		}
		holder = taken
	}
	cred, args := p.jobStep(pj, "/usr/bin/dd", "of="+filepath.Join(dir, "in"), "status=none")
	cmd := p.cli.command(ctx, cred, "srun", args...)
	cmd.Stdin = in
	cmd.WaitDelay = stdinWaitDelay
	if out, err := cmd.CombinedOutput(); err != nil && ctx.Err() == nil {
		log.G(ctx).WithError(err).Warnf("attach: writing the stdin of %s: %s", dir, out)
	}
	if !once {
		return
	}
	data, err := sandbox.ReadRegular(holder, 64)
	pid := strings.TrimSpace(string(data))
	if _, perr := strconv.Atoi(pid); err != nil || perr != nil {
		log.G(ctx).Warnf("attach: no holder pid in %s (%v): the container's stdin stays open", holder, err)
		return
	}
	// The session's context may be over: the close must still happen.
	kctx, stop := context.WithTimeout(context.WithoutCancel(ctx), time.Minute)
	defer stop()
	cred, args = p.jobStep(pj, "/bin/kill", pid)
	if _, err := p.cli.run(kctx, cred, "srun", args...); err != nil {
		log.G(ctx).WithError(err).Warnf("attach: closing the stdin of %s", dir)
	}
}
