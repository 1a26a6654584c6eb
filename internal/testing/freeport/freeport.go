// Package freeport hands out loopback TCP ports that nothing listens on, for
// tests and the local control plane.
package freeport

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"net"
	"os"
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

// Block returns the first of n consecutive loopback ports that nothing
// listens on and that this process has not handed out, for a daemon that
// listens on port+i (--node-count). They are taken below the kernel's
// ephemeral range: a connection's local port is drawn from that range, so
// there one of the ports could be taken between this check and the
// daemon's listen.
func Block(n int) (int, error) {
	if n < 1 {
		return 0, fmt.Errorf("freeport: a block of %d ports", n)
	}
	low := ephemeralLow()
	const first = 10000
	if low-n <= first {
		return 0, fmt.Errorf("freeport: no room for %d ports below the ephemeral range at %d", n, low)
	}
	mu.Lock()
	defer mu.Unlock()
	for range 100 {
		start := first + rand.IntN(low-n-first)
		if free(start, n) {
			for p := start; p < start+n; p++ {
				handed[p] = true
			}
			return start, nil
		}
	}
	return 0, errors.New("freeport: no block of free ports in 100 tries")
}

// free reports whether ports start to start+n-1 are unhanded and each can
// be listened on; mu must be held.
func free(start, n int) bool {
	var held []net.Listener
	defer func() {
		for _, l := range held {
			_ = l.Close()
		}
	}()
	for p := start; p < start+n; p++ {
		if handed[p] {
			return false
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			return false
		}
		held = append(held, l)
	}
	return true
}

// ephemeralLow is the first port of the kernel's ephemeral range (Linux's
// default, 32768, where it cannot be read).
func ephemeralLow() int {
	var low, high int
	data, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err == nil {
		_, err = fmt.Sscan(string(data), &low, &high)
	}
	if err != nil || low < 1024 {
		return 32768
	}
	return low
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

// GetBlock is Block for a test, which it fails if no block can be had.
func GetBlock(t T, n int) int {
	t.Helper()
	port, err := Block(n)
	if err != nil {
		t.Fatal(err)
	}
	return port
}
