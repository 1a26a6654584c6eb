package queue

import (
	"iter"
	"maps"
)

// keyMap is a map of a queue's keys that lets its table go once emptied. A
// Go map never shrinks: a queue that once held a burst (ten thousand pods
// created at once) would keep a table sized for it at rest, for each of its
// maps, in every queue.
type keyMap[V any] struct {
	m map[string]V
	// peak is the most keys m has held since it was made.
	peak int
}

// keepBelow is the peak up to which an emptied table is kept for reuse,
// as small as the keys of a few pods.
const keepBelow = 64

func (k *keyMap[V]) get(key string) (V, bool) {
	v, ok := k.m[key]
	return v, ok
}

func (k *keyMap[V]) set(key string, v V) {
	if k.m == nil {
		k.m = map[string]V{}
	}
	k.m[key] = v
	k.peak = max(k.peak, len(k.m))
}

func (k *keyMap[V]) remove(key string) {
	delete(k.m, key)
	if len(k.m) == 0 && k.peak > keepBelow {
		k.m, k.peak = nil, 0
	}
}

func (k *keyMap[V]) len() int { return len(k.m) }

func (k *keyMap[V]) values() iter.Seq[V] { return maps.Values(k.m) }

// clear removes every key and lets the table go.
func (k *keyMap[V]) clear() { k.m, k.peak = nil, 0 }
