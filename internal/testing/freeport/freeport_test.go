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

// TestBlockIsFreeAndBelowTheEphemeralRange: each port of a block can be
// listened on, lies below the range connections draw their local ports
// from, and is not handed out again.
func TestBlockIsFreeAndBelowTheEphemeralRange(t *testing.T) {
	start := freeport.GetBlock(t, 3)
	for p := start; p < start+3; p++ {
		if p >= 32768 {
			t.Errorf("port %d is in the default ephemeral range", p)
		}
		l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", p))
		if err != nil {
			t.Fatal(err)
		}
		_ = l.Close()
	}
	again := freeport.GetBlock(t, 3)
	if again < start+3 && start < again+3 {
		t.Errorf("blocks at %d and %d overlap", start, again)
	}
	if _, err := freeport.Block(0); err == nil {
		t.Error("a block of 0 ports was handed out")
	}
}
