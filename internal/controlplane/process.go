package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"sync"
	"syscall"
	"time"
)

// process is a component running as a child process.
type process struct {
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}

	mu  sync.Mutex
	err error
}

func startProcess(bin string, args []string, logPath string) (*process, error) {
	log, err := os.OpenFile(logPath, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return nil, err
	}
	defer log.Close()
	fmt.Fprintf(log, "==== %s %s %v\n", time.Now().Format(time.RFC3339), bin, args)
	cmd := exec.Command(bin, args...)
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{
		// Its own process group, so a Ctrl-C meant for the caller does not
		// race our orderly shutdown; and killed if the caller dies.
		Setpgid:   true,
		Pdeathsig: syscall.SIGKILL,
	}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	p := &process{cmd: cmd, logPath: logPath, done: make(chan struct{})}
	go func() {
		err := cmd.Wait()
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
		close(p.done)
	}()
	return p, nil
}

func (p *process) running() bool {
	select {
	case <-p.done:
		return false
	default:
		return true
	}
}

// exitErr says how the process ended, once it has.
func (p *process) exitErr() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil {
		return errors.New("exited with status 0")
	}
	return p.err
}

// stopGrace bounds a component's graceful shutdown. The apiserver otherwise
// drains for a minute; a test cluster's data is disposable, so a kill after
// this is as good as a clean exit.
const stopGrace = 5 * time.Second

// stop sends SIGTERM, waits up to stopGrace, then kills.
func (p *process) stop() {
	if !p.running() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(stopGrace):
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}
