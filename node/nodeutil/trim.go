package nodeutil

import (
	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node/intern"
)

// TrimPodsWith returns a pod informer's transform: DropManagedFields, and
// the values pods repeat (strings, resource lists, label maps, volume
// sources, tolerations, environment lists, security contexts, affinity,
// probes) shared with the pods in has seen before. The pods of a
// Deployment differ in little more than names, UIDs, IPs and times, and
// decoded each holds its own copy of the rest. Cached objects are
// read-only (whoever changes one copies it first), so sharing them is
// safe. The informers of many nodes, and their providers, share the most
// when they share one Interner.
func TrimPodsWith(in *intern.Interner) cache.TransformFunc {
	return func(obj any) (any, error) {
		if pod, ok := obj.(*corev1.Pod); ok {
			in.Pod(pod)
		}
		return DropManagedFields(obj)
	}
}

// TrimNodesWith is a Node informer's transform: DropManagedFields, and the
// values Nodes repeat (capacity, conditions, the node's software) shared
// through in (intern.Interner.Node), so that a process managing a thousand
// Nodes caches each such value once.
func TrimNodesWith(in *intern.Interner) cache.TransformFunc {
	return func(obj any) (any, error) {
		if node, ok := obj.(*corev1.Node); ok {
			in.Node(node)
		}
		return DropManagedFields(obj)
	}
}

// TrimPods is a pod informer's transform that keeps no tables:
// DropManagedFields, and a pod's strings made canonical (intern.String),
// so that pods share their namespaces, images and the like. Maps and
// lists are shared only by TrimPodsWith, whose Interner keeps them.
func TrimPods(obj any) (any, error) {
	// A nil Interner shares strings only.
	return TrimPodsWith(nil)(obj)
}
