package kubernetes

import (
	"errors"
	"testing"
)

// TestReflectionBudget: objects and bytes are bounded; an object counted
// again at its new size, shrinking past the bound, and released objects
// free their share.
func TestReflectionBudget(t *testing.T) {
	b := newReflectionBudget(2, 100)
	for _, step := range []struct {
		key   string
		size  int
		limit bool
	}{
		{"a", 40, false},
		{"b", 50, false},
		{"c", 1, true},   // a third object
		{"a", 60, true},  // 110 bytes
		{"a", 50, false}, // 100 bytes
		{"b", 40, false}, // shrinks
	} {
		err := b.reserve(step.key, step.size)
		if errors.Is(err, errReflectionLimit) != step.limit {
			t.Fatalf("reserve(%s, %d): %v", step.key, step.size, err)
		}
	}
	if n, bytes := b.usage(); n != 2 || bytes != 90 {
		t.Fatalf("usage %d objects, %d bytes; want 2, 90", n, bytes)
	}
	b.release("a")
	if err := b.reserve("c", 60); err != nil {
		t.Fatal(err)
	}
	if n, bytes := b.usage(); n != 2 || bytes != 100 {
		t.Fatalf("usage %d objects, %d bytes; want 2, 100", n, bytes)
	}
}
