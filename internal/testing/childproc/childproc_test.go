package childproc

import (
	"errors"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

func TestStopEndsOnSIGTERM(t *testing.T) {
	p, err := Start(exec.Command("sleep", "60"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Exited() {
		t.Fatal("exited at once")
	}
	if killed := p.Stop(10 * time.Second); killed {
		t.Error("sleep needed SIGKILL; SIGTERM ends it")
	}
	if !p.Exited() || p.Err() == nil {
		t.Errorf("after Stop: exited=%v err=%v, want a signal error", p.Exited(), p.Err())
	}
	if p.Stop(time.Second) {
		t.Error("stopping an exited process killed it")
	}
}

func TestStopKillsAfterGrace(t *testing.T) {
	// A shell that ignores SIGTERM.
	p, err := Start(exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`))
	if err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond) // let the trap be set
	if killed := p.Stop(300 * time.Millisecond); !killed {
		t.Error("a process ignoring SIGTERM was not killed")
	}
	select {
	case <-p.Done():
	default:
		t.Error("Done not closed after Stop")
	}
}

func TestExitStatus(t *testing.T) {
	p, err := Start(exec.Command("true"))
	if err != nil {
		t.Fatal(err)
	}
	<-p.Done()
	if p.Err() != nil || p.Cmd.ProcessState.ExitCode() != 0 {
		t.Errorf("true: err=%v code=%d", p.Err(), p.Cmd.ProcessState.ExitCode())
	}
}

func TestKillSendsSIGKILL(t *testing.T) {
	// A shell that ignores SIGTERM still dies at once.
	p, err := Start(exec.Command("sh", "-c", `trap "" TERM; while :; do sleep 0.1; done`))
	if err != nil {
		t.Fatal(err)
	}
	p.Kill()
	var exit *exec.ExitError
	if !errors.As(p.Err(), &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Errorf("after Kill: %v, want killed by SIGKILL", p.Err())
	}
	p.Kill() // an exited process is left alone
}
