package main

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/vkubelet/virtual-kubelet/internal/testing/controlplane"
)

// controlSocket is the supervisor's unix socket in the cluster's directory
// (0700, so only its owner reaches it). A client writes a component's name
// and a newline; the supervisor restarts that component and answers "ok" or
// "error: ..." on one line.
const controlSocket = "control.sock"

// restartable are the components `cluster restart` takes.
var restartable = []string{controlplane.Etcd, controlplane.APIServer, controlplane.Scheduler, controlplane.ControllerManager, controlplane.MetricsServer}

// restartTimeout bounds a component's stop and start.
const restartTimeout = 3 * time.Minute

// control serves the control socket; one restart runs at a time.
type control struct {
	l    net.Listener
	mu   sync.Mutex // held by a restart, and by close to wait for one
	done sync.WaitGroup
}

// serveControl listens on the control socket of the cluster in dir.
func serveControl(ctx context.Context, dir string, cp *controlplane.ControlPlane) (*control, error) {
	path := filepath.Join(dir, controlSocket)
	_ = os.Remove(path)
	l, err := net.Listen("unix", path)
	if err != nil {
		return nil, fmt.Errorf("control socket: %w", err)
	}
	c := &control{l: l}
	c.done.Add(1)
	go func() {
		defer c.done.Done()
		for {
			conn, err := l.Accept()
			if err != nil {
				return
			}
			c.handle(ctx, conn, cp)
		}
	}()
	return c, nil
}

// handle serves one request: a component's name, answered once it is back.
func (c *control) handle(ctx context.Context, conn net.Conn, cp *controlplane.ControlPlane) {
	defer conn.Close()
	_ = conn.SetReadDeadline(time.Now().Add(10 * time.Second))
	name, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return
	}
	name = strings.TrimSpace(name)
	answer := "ok"
	if err := c.restart(ctx, cp, name); err != nil {
		answer = "error: " + err.Error()
	}
	fmt.Printf("restart %s: %s\n", name, answer)
	_, _ = fmt.Fprintln(conn, answer)
}

func (c *control) restart(ctx context.Context, cp *controlplane.ControlPlane, name string) error {
	if !slices.Contains(restartable, name) {
		return fmt.Errorf("unknown component %q (one of %s)", name, strings.Join(restartable, ", "))
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := cp.StopComponent(name); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, restartTimeout)
	defer cancel()
	return cp.StartComponent(ctx, name)
}

// close stops taking requests and waits for a restart under way.
func (c *control) close() {
	_ = c.l.Close()
	c.done.Wait()
	c.mu.Lock()
	defer c.mu.Unlock()
}

// restart asks the supervisor of the cluster in the directory to restart
// one component and waits for its answer.
func restart(args []string) error {
	f, rest, err := parse("restart", args)
	if err != nil {
		return err
	}
	if len(rest) != 1 {
		return fmt.Errorf("usage: cluster restart [--dir D] COMPONENT (one of %s)", strings.Join(restartable, ", "))
	}
	if running(f.dir) == nil {
		return fmt.Errorf("no control plane is running in %s: run `make cluster-up`", f.dir)
	}
	conn, err := net.Dial("unix", filepath.Join(f.dir, controlSocket))
	if err != nil {
		return fmt.Errorf("the supervisor in %s takes no requests (started by an older `cluster`?): %w", f.dir, err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(restartTimeout + 30*time.Second))
	if _, err := fmt.Fprintln(conn, rest[0]); err != nil {
		return err
	}
	answer, err := bufio.NewReader(conn).ReadString('\n')
	if err != nil {
		return fmt.Errorf("no answer from the supervisor in %s: %w", f.dir, err)
	}
	answer = strings.TrimSpace(answer)
	if msg, failed := strings.CutPrefix(answer, "error: "); failed {
		return errors.New(msg)
	}
	fmt.Printf("%s restarted\n", rest[0])
	return nil
}
