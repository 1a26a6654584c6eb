package freeport_test

import (
	"fmt"
	"net"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
)

// TestNeverTheSamePortTwice asks for more ports than the kernel cycles
// through before it reuses one it just freed.
func TestNeverTheSamePortTwice(t *testing.T) {
	seen := map[int]bool{}
	for range 2000 {
		port := freeport.Get(t)
		if seen[port] {
			t.Fatalf("port %d handed out twice", port)
		}
		seen[port] = true
	}
}

func TestThePortIsFree(t *testing.T) {
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", freeport.Get(t)))
	if err != nil {
		t.Fatal(err)
	}
	_ = l.Close()
}
