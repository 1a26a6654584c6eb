// Package freeport hands out loopback TCP ports that nothing listens on, for
// tests and the local control plane.
package freeport

import (
	"net"
	"sync"
)

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Next returns a loopback port nothing listens on and that Next has not
// returned before in this process. The kernel may hand a port it just
// freed out again, so two ports asked for one after the other (a daemon's
// kubelet API and its metrics address, etcd's client and peer ports) could
// otherwise be the same one.
func Next() (int, error) {
	mu.Lock()
	defer mu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return 0, err
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handed[port] {
			handed[port] = true
			return port, nil
		}
	}
}

// T is the part of testing.TB that Get uses; the package does not import
// testing, so that the local control plane's binaries do not link it.
type T interface {
	Helper()
	Fatal(args ...any)
}

// Get is Next for a test, which it fails if no port can be had.
func Get(t T) int {
	t.Helper()
	port, err := Next()
	if err != nil {
		t.Fatal(err)
	}
	return port
}
