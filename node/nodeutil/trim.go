package nodeutil

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/internal/intern"
)

// TrimPods is the pod informers' transform: DropManagedFields, and the
// values pods repeat (strings, resource lists, label maps, volume sources,
// tolerations, environment lists, security contexts, affinity, probes) shared with the pods
// cached before it. The pods of a Deployment differ in little more than
// names, UIDs, IPs and times, and decoded each holds its own copy of the
// rest. Cached objects are read-only (whoever changes one copies it
// first), so sharing them is safe.
func TrimPods(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		intern.Pod(pod)
	}
	return DropManagedFields(obj)
}
