package ha

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"
)

// TestFenceGuardRefusesOnceDown: a provider call is allowed while the
// fence is up and refused with ErrFenced, naming the call and the node,
// once it is down, whether or not the fence's context has ended yet; the
// fence rides on its context for whoever builds the node's provider.
func TestFenceGuardRefusesOnceDown(t *testing.T) {
	f := NewFence("vk-0", time.Hour)
	if err := f.Guard(context.Background(), "CreatePod"); !errors.Is(err, ErrFenced) {
		t.Errorf("a fence never renewed let CreatePod through: %v", err)
	}
	f.renewed(time.Now())
	if err := f.Guard(context.Background(), "CreatePod"); err != nil {
		t.Errorf("CreatePod while the fence is up: %v", err)
	}
	ctx, cancel := f.Context(context.Background())
	defer cancel()
	if FenceOf(ctx) != f {
		t.Error("the fence's context does not carry it")
	}
	if FenceOf(context.Background()) != nil {
		t.Error("a context without a fence has one")
	}
	f.drop()
	err := f.Guard(context.Background(), "DeletePod")
	if !errors.Is(err, ErrFenced) || !strings.Contains(err.Error(), "DeletePod") || !strings.Contains(err.Error(), "vk-0") {
		t.Errorf("DeletePod after the fence went down: %v, want ErrFenced naming the call and node", err)
	}
}
