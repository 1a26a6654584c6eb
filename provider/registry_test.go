package provider

import (
	"context"
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/node"
)

func TestRegistry(t *testing.T) {
	mu.Lock()
	saved := registry
	registry = map[string]InitFunc{}
	mu.Unlock()
	t.Cleanup(func() { mu.Lock(); registry = saved; mu.Unlock() })

	if _, err := Get("mock"); err == nil || !strings.Contains(err.Error(), "without providers") {
		t.Errorf("empty registry: %v", err)
	}
	f := func(context.Context, InitConfig) (node.Provider, error) { return nil, nil }
	Register("zeta", f)
	Register("alpha", f)
	if got := strings.Join(Names(), ","); got != "alpha,zeta" {
		t.Errorf("Names = %s", got)
	}
	if _, err := Get("alpha"); err != nil {
		t.Error(err)
	}
	_, err := Get("nope")
	if err == nil || err.Error() != `unknown provider "nope" (known: alpha, zeta)` {
		t.Errorf("unknown provider error: %v", err)
	}
	defer func() {
		if recover() == nil {
			t.Error("registering a name twice must panic")
		}
	}()
	Register("alpha", f)
}
