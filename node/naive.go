package node

import (
	"context"
	"errors"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

var errNotCreatedWithConstructor = errors.New("NaiveNodeProviderV2 must be created with NewNaiveNodeProvider to send status updates")

// NaiveNodeProvider is a basic node provider that only uses the passed in
// context on `Ping` to determine if the node is healthy.
type NaiveNodeProvider struct{}

// Ping just implements the NodeProvider interface.
// It returns the error from the passed in context only.
func (NaiveNodeProvider) Ping(ctx context.Context) error {
	return ctx.Err()
}

// NotifyNodeStatus implements the NodeProvider interface.
//
// This NaiveNodeProvider does not support updating node status and so this
// function is a no-op.
func (NaiveNodeProvider) NotifyNodeStatus(_ context.Context, _ func(*corev1.Node)) {}

// NaiveNodeProviderV2 is like NaiveNodeProvider except it supports accepting
// node status updates. It must be used with as a pointer and must be created
// with `NewNaiveNodeProvider`.
type NaiveNodeProviderV2 struct {
	mu         sync.Mutex
	cb         func(*corev1.Node)
	registered chan struct{}
}

// NewNaiveNodeProvider creates a new NaiveNodeProviderV2. You must use this to
// create a NaiveNodeProviderV2 if you want to be able to send node status
// updates to the node controller.
func NewNaiveNodeProvider() *NaiveNodeProviderV2 {
	return &NaiveNodeProviderV2{registered: make(chan struct{})}
}

// Ping just implements the NodeProvider interface.
// It returns the error from the passed in context only.
func (*NaiveNodeProviderV2) Ping(ctx context.Context) error {
	return ctx.Err()
}

// NotifyNodeStatus implements the NodeProvider interface.
//
// NaiveNodeProvider does not support updating node status unless created with
// `NewNaiveNodeProvider`. Otherwise this is a no-op.
func (n *NaiveNodeProviderV2) NotifyNodeStatus(_ context.Context, f func(*corev1.Node)) {
	if n.registered == nil {
		return
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.cb == nil {
		n.cb = f
		close(n.registered)
	}
}

// UpdateStatus sends the node, as it should now be (labels, annotations,
// taints and status), to the node controller. It waits
// until a node controller has registered for updates or ctx ends, and returns
// ctx's error in the latter case.
func (n *NaiveNodeProviderV2) UpdateStatus(ctx context.Context, node *corev1.Node) error {
	if n.registered == nil {
		return errNotCreatedWithConstructor
	}
	select {
	case <-n.registered:
	case <-ctx.Done():
		return ctx.Err()
	}
	n.mu.Lock()
	cb := n.cb
	n.mu.Unlock()
	cb(node.DeepCopy())
	return nil
}
