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
	var l net.Listener
	err := h.inNamespace(func() (err error) {
		l, err = net.Listen("tcp", net.JoinHostPort(h.Addr.String(), fmt.Sprint(port)))
		return err
	})
	if err != nil && l != nil { // made, but the thread could not leave
		_ = l.Close()
		return nil, err
	}
	return l, err
}

// Dial connects from inside the host's network namespace, from this
// process: to what a process of the host serves on its own loopback, say.
func (h *Host) Dial(network, address string) (net.Conn, error) {
	var c net.Conn
	err := h.inNamespace(func() (err error) {
		c, err = net.Dial(network, address)
		return err
	})
	if err != nil && c != nil { // made, but the thread could not leave
		_ = c.Close()
		return nil, err
	}
	return c, err
}

// inNamespace calls f on a thread in the host's network namespace.
func (h *Host) inNamespace(f func() error) error {
	ch := make(chan error, 1)
	go func() {
		// The goroutine's thread switches namespace; if switching back
		// fails the thread must die with the goroutine, so it is unlocked
		// only on success.
		runtime.LockOSThread()
		restored, err := h.inNamespaceLocked(f)
		if restored {
			runtime.UnlockOSThread()
		}
		ch <- err
	}()
	return <-ch
}

func (h *Host) inNamespaceLocked(f func() error) (restored bool, err error) {
	self, err := os.Open("/proc/thread-self/ns/net")
	if err != nil {
		return true, err
	}
	defer self.Close()
	target, err := os.Open(filepath.Join("/run/netns", h.Namespace))
	if err != nil {
		return true, fmt.Errorf("node host %s: %w", h.Namespace, err)
	}
	defer target.Close()
	if err := unix.Setns(int(target.Fd()), unix.CLONE_NEWNET); err != nil {
		return true, fmt.Errorf("entering node host %s: %w", h.Namespace, err)
	}
	err = f()
	if rerr := unix.Setns(int(self.Fd()), unix.CLONE_NEWNET); rerr != nil {
		return false, fmt.Errorf("leaving node host %s: %w", h.Namespace, rerr)
	}
	return true, err
}
