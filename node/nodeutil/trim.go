package nodeutil

import (
	"maps"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
)

// TrimPods is the pod informers' transform: DropManagedFields, and the
// resource lists of a pod's spec and status shared with the pods cached
// before it that have equal ones. The pods of a Deployment repeat the same
// requests and limits in their spec and in their containers' statuses, and
// each list is a map of its own: a fifth of a cached pod. Cached objects
// are read-only (whoever changes one copies it first), so sharing them is
// safe.
func TrimPods(obj any) (any, error) {
	if pod, ok := obj.(*corev1.Pod); ok {
		sharedResourceLists.sharePod(pod)
	}
	return DropManagedFields(obj)
}

// sharedResourceLists is the process's: informers of many nodes share it.
var sharedResourceLists = newListInterner(4096)

// listInterner hands out one instance of each distinct resource list it is
// given. It keeps at most max lists; when full it starts over, so lists no
// pod has any more are not kept for ever.
type listInterner struct {
	mu    sync.Mutex
	lists map[string]corev1.ResourceList
	max   int
}

func newListInterner(max int) *listInterner {
	return &listInterner{lists: make(map[string]corev1.ResourceList), max: max}
}

// share returns the instance of a list equal to l, l itself the first time.
func (in *listInterner) share(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
		return l
	}
	key := listKey(l)
	in.mu.Lock()
	defer in.mu.Unlock()
	if s, ok := in.lists[key]; ok {
		return s
	}
	if len(in.lists) >= in.max {
		clear(in.lists)
	}
	in.lists[key] = l
	return l
}

// listKey is l's names and quantities in canonical form, sorted: two lists
// with the same key serialize the same. Resource names hold neither '='
// nor ','.
func listKey(l corev1.ResourceList) string {
	var b strings.Builder
	for _, name := range slices.Sorted(maps.Keys(l)) {
		q := l[name]
		b.WriteString(string(name))
		b.WriteByte('=')
		b.WriteString(q.String())
		b.WriteByte(',')
	}
	return b.String()
}

func (in *listInterner) shareRequirements(r *corev1.ResourceRequirements) {
	if r != nil {
		r.Requests, r.Limits = in.share(r.Requests), in.share(r.Limits)
	}
}

// sharePod shares the resource lists of pod's containers, of the pod and of
// its container statuses.
func (in *listInterner) sharePod(pod *corev1.Pod) {
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			in.shareRequirements(&list[i].Resources)
		}
	}
	in.shareRequirements(pod.Spec.Resources)
	pod.Spec.Overhead = in.share(pod.Spec.Overhead)
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for i := range list {
			list[i].AllocatedResources = in.share(list[i].AllocatedResources)
			in.shareRequirements(list[i].Resources)
		}
	}
	pod.Status.AllocatedResources = in.share(pod.Status.AllocatedResources)
	in.shareRequirements(pod.Status.Resources)
}
