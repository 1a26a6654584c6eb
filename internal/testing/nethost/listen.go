package nethost

import (
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"

	"golang.org/x/sys/unix"
)

// Listen opens a TCP listener inside the host's network namespace, from this
// process. A socket stays in the namespace it was made in, so an in-process
// server can be reached at the host's address (and so proxied to by the
// apiserver) while the rest of the process stays in the root namespace.
func (h *Host) Listen(port int) (net.Listener, error) {
	type result struct {
		l   net.Listener
		err error
	}
	ch := make(chan result, 1)
	go func() {
		// The goroutine's thread switches namespace; if switching back
		// fails the thread must die with the goroutine, so it is unlocked
		// only on success.
		runtime.LockOSThread()
		l, restored, err := h.listenLocked(port)
		if restored {
			runtime.UnlockOSThread()
		}
		ch <- result{l, err}
	}()
	r := <-ch
	return r.l, r.err
}

func (h *Host) listenLocked(port int) (l net.Listener, restored bool, err error) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return nil, true, err
	}
	defer self.Close()
	target, err := os.Open(filepath.Join("/run/netns", h.Namespace))
	if err != nil {
		return nil, true, fmt.Errorf("node host %s: %w", h.Namespace, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return nil, true, fmt.Errorf("entering node host %s: %w", h.Namespace, err)
	}
	l, err = net.Listen("tcp", net.JoinHostPort(h.Addr.String(), fmt.Sprint(port)))
	if rerr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); rerr != nil {
		if l != nil {
			_ = l.Close()
		}
		return nil, false, fmt.Errorf("leaving node host %s: %w", h.Namespace, rerr)
	}
	return l, true, err
}
