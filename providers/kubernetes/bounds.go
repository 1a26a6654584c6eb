package kubernetes

import (
	"errors"
	"fmt"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// ReasonReflectionLimit is the reason of the Warning recorded on a pod of
// A when an object it needs is not written into B because the node's
// reflection bounds (the config's reflection) are reached.
const ReasonReflectionLimit = "ReflectionLimit"

// errReflectionLimit is the error of an object past the node's bounds.
var errReflectionLimit = errors.New("reflection limit")

// reflectionBudget counts the objects the node keeps in B for A's pods
// (copies, Services, EndpointSlices, token Secrets), by a key per object,
// and their sizes (their protobuf encoding, as etcd stores them), against
// the config's bounds. Every write of an object reserves its size first,
// and its deletion releases it; a daemon that restarts counts the objects
// again as it next writes or finds them in line.
type reflectionBudget struct {
	maxObjects int
	maxBytes   int64

	mu    sync.Mutex
	sizes map[string]int64
	bytes int64
}

func newReflectionBudget(maxObjects int, maxBytes int64) *reflectionBudget {
	return &reflectionBudget{maxObjects: maxObjects, maxBytes: maxBytes, sizes: map[string]int64{}}
}

// reserve counts the object key at size bytes (an object counted already
// at its new size), or fails, counting nothing new, when that passes a
// bound.
func (b *reflectionBudget) reserve(key string, size int) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	old, counted := b.sizes[key]
	objects, bytes := len(b.sizes), b.bytes-old+int64(size)
	if !counted {
		objects++
	}
	switch {
	case objects > b.maxObjects:
		return fmt.Errorf("%w: the node keeps %d objects in the remote cluster, the most reflection.maxObjects allows", errReflectionLimit, b.maxObjects)
	case bytes > b.maxBytes && int64(size) > old:
		return fmt.Errorf("%w: %d more bytes would pass the node's reflection.maxBytes of %d (it keeps %d)", errReflectionLimit, int64(size)-old, b.maxBytes, b.bytes)
	}
	b.sizes[key], b.bytes = int64(size), bytes
	return nil
}

// release stops counting the object key, deleted from B.
func (b *reflectionBudget) release(key string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.bytes -= b.sizes[key]
	delete(b.sizes, key)
}

// usage is what the budget counts.
func (b *reflectionBudget) usage() (objects int, bytes int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.sizes), b.bytes
}

// limitEvent records on A's pod that something it needs was not written
// into B past the node's bounds; other errors are the caller's to report.
// The recorder's correlator keeps a pod retried every few seconds to one
// Event that counts up.
func (p *Provider) limitEvent(pod *corev1.Pod, err error) {
	if p.recorder == nil || !errors.Is(err, errReflectionLimit) {
		return
	}
	p.recorder.Event(&corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID},
		corev1.EventTypeWarning, ReasonReflectionLimit, err.Error())
}
