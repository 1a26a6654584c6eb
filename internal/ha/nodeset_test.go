package ha

import (
	"testing"
	"time"
)

// liveMembers is a replica that sees the given others live, without an API
// server.
func liveMembers(identity string, others ...string) *Members {
	m := &Members{cfg: Config{Identity: identity, LeaseDuration: time.Minute}, seen: map[string]seenLease{}}
	for _, o := range others {
		m.seen[o] = seenLease{at: time.Now()}
	}
	return m
}

// TestAddedNodesAreSharedAlike: replicas that see the same Nodes appear in
// different orders prefer the same replica for each, split them evenly,
// and a removed node is nobody's.
func TestAddedNodesAreSharedAlike(t *testing.T) {
	a, b := liveMembers("a", "b"), liveMembers("b", "a")
	nodes := names("karp", 20)
	for i := range nodes {
		a.AddNode(nodes[i])
		b.AddNode(nodes[len(nodes)-1-i])
	}
	a.AddNode(nodes[3]) // twice is once
	load := map[string]int{}
	for _, n := range nodes {
		pa, pb := a.Preferred(n), b.Preferred(n)
		if pa != pb {
			t.Errorf("%s: replica a prefers %q, b %q", n, pa, pb)
		}
		load[pa]++
	}
	if load["a"] != 10 || load["b"] != 10 {
		t.Errorf("loads %v, want 10 each", load)
	}
	a.RemoveNode(nodes[0])
	if p := a.Preferred(nodes[0]); p != "" {
		t.Errorf("a removed node is preferred for %q", p)
	}
	if p := a.Preferred(nodes[1]); p == "" {
		t.Error("the others still have a replica")
	}
}
