package controlplane

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
)

// process is a component running as a child process.
type process struct {
	*childproc.Process
	logPath string
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
	p, err := childproc.Start(cmd)
	if err != nil {
		return nil, err
	}
	return &process{Process: p, logPath: logPath}, nil
}

// exitErr says how the process ended, once it has.
func (p *process) exitErr() error {
	if err := p.Err(); err != nil {
		return err
	}
	return errors.New("exited with status 0")
}

// stopGrace bounds a component's graceful shutdown. The apiserver otherwise
// drains for a minute; a test cluster's data is disposable, so a kill after
// this is as good as a clean exit.
const stopGrace = 5 * time.Second

// stop sends SIGTERM, waits up to stopGrace, then kills.
func (p *process) stop() { p.Stop(stopGrace) }
