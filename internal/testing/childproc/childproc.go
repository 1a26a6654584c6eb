// Package childproc runs a child process and stops it as a supervisor does:
// SIGTERM, then SIGKILL once a grace period has passed.
package childproc

import (
	"os/exec"
	"syscall"
	"time"
)

// Process is a started command and the wait for its end.
type Process struct {
	Cmd  *exec.Cmd
	done chan struct{}
	err  error // written before done is closed
}

// Start starts cmd and waits for it in the background.
func Start(cmd *exec.Cmd) (*Process, error) {
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &Process{Cmd: cmd, done: make(chan struct{})}
	go func() {
		p.err = cmd.Wait()
		close(p.done)
	}()
	return p, nil
}

// Done is closed once the process has exited.
func (p *Process) Done() <-chan struct{} { return p.done }

// Exited reports whether the process has exited.
func (p *Process) Exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

// Err is what waiting for the process returned (nil for exit status 0);
// call it once Done is closed.
func (p *Process) Err() error {
	<-p.done
	return p.err
}

// Stop sends SIGTERM and waits up to grace for the process to exit, then
// kills it. It reports whether the kill was needed; a process that had
// already exited is left alone.
func (p *Process) Stop(grace time.Duration) (killed bool) {
	if p.Exited() {
		return false
	}
	_ = p.Cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return false
	case <-time.After(grace):
		_ = p.Cmd.Process.Kill()
		<-p.done
		return true
	}
}

// Kill sends SIGKILL, as a crash or the OOM killer does, and returns once the
// process has exited; a process that had already exited is left alone.
func (p *Process) Kill() {
	if p.Exited() {
		return
	}
	_ = p.Cmd.Process.Kill()
	<-p.done
}
