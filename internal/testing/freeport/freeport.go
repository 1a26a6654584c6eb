// Package freeport hands tests loopback TCP ports that nothing listens on.
package freeport

import (
	"net"
	"sync"
	"testing"
)

var (
	mu     sync.Mutex
	handed = map[int]bool{}
)

// Get returns a loopback port nothing listens on and that Get has not
// returned before in this process. The kernel may hand a port it just
// freed out again, so two ports asked for one after the other (a daemon's
// kubelet API and its metrics address) could otherwise be the same one.
func Get(t testing.TB) int {
	t.Helper()
	mu.Lock()
	defer mu.Unlock()
	for {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		port := l.Addr().(*net.TCPAddr).Port
		_ = l.Close()
		if !handed[port] {
			handed[port] = true
			return port
		}
	}
}
