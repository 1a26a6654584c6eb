package nodeutil

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// relistEvery is how long WaitCaughtUp compares the cache with one list
// before it lists again: a listed pod deleted since never reaches the cache.
const relistEvery = time.Second

// WaitCaughtUp returns once the shared cache holds node's pods at least as
// the API server has them now, or when ctx ends. A node taken over by a
// process whose watch fell behind (it was paused, or cut off, while
// another replica served the node) must not act on what it still caches:
// it would create pods deleted meanwhile, or delete pods that were
// replaced. The API server's view is a consistent list of the node's pods,
// taken again every second while the cache has not caught up with it.
func (p *PodsByNode) WaitCaughtUp(ctx context.Context, client kubernetes.Interface, node string) error {
	if !cache.WaitForCacheSync(ctx.Done(), p.informer.HasSynced) {
		return context.Cause(ctx)
	}
	started := time.Now()
	var listed *corev1.PodList
	var nextList time.Time
	err := wait.PollUntilContextCancel(ctx, 50*time.Millisecond, true, func(ctx context.Context) (bool, error) {
		if now := time.Now(); !now.Before(nextList) {
			// A failed list is tried again as late as a stale one, so an
			// API server that does not answer gets one warning a second.
			nextList = now.Add(relistEvery)
			l, err := client.CoreV1().Pods(metav1.NamespaceAll).List(ctx, metav1.ListOptions{
				FieldSelector: fields.OneTermEqualSelector("spec.nodeName", node).String(),
			})
			if err != nil {
				log.G(ctx).WithError(err).Warn("listing the node's pods to check the pod cache; retrying")
			} else {
				listed = l
			}
		}
		if listed == nil {
			return false, nil
		}
		cached, err := p.informer.GetIndexer().ByIndex(NodeNameIndex, node)
		if err != nil {
			return false, fmt.Errorf("node %s: reading the pod cache: %w", node, err)
		}
		return caughtUp(cached, listed), nil
	})
	if err != nil {
		return err
	}
	if waited := time.Since(started); waited > relistEvery {
		log.G(ctx).Infof("the pod cache was behind the API server: caught up after %s", waited.Round(time.Millisecond))
	}
	return nil
}

// caughtUp reports whether cached, the cache's pods of a node, is at
// least as new as listed, a consistent list of them: every listed pod is
// cached at its version or newer, and every cached pod is listed or newer
// than the list (created since). A listed pod missing from the cache is not
// caught up, even if deleted since: the next list tells. Versions that
// cannot be compared count as caught up, so an API server with opaque
// versions is not waited on for ever.
func caughtUp(cached []any, listed *corev1.PodList) bool {
	byKey := make(map[string]*corev1.Pod, len(cached))
	for _, obj := range cached {
		if pod, ok := obj.(*corev1.Pod); ok {
			byKey[pod.Namespace+"/"+pod.Name] = pod
		}
	}
	listedUIDs := make(map[types.UID]bool, len(listed.Items))
	for i := range listed.Items {
		l := &listed.Items[i]
		listedUIDs[l.UID] = true
		c := byKey[l.Namespace+"/"+l.Name]
		switch {
		case c == nil:
			return false
		case c.UID == l.UID:
			if olderThan(c.ResourceVersion, l.ResourceVersion) {
				return false
			}
		case !after(c.ResourceVersion, listed.ResourceVersion):
			// Another pod of that name, not created since the list.
			return false
		}
	}
	for _, c := range byKey {
		if !listedUIDs[c.UID] && !after(c.ResourceVersion, listed.ResourceVersion) {
			// Gone by the time of the list, still cached.
			return false
		}
	}
	return true
}

// olderThan reports whether resource version a is known to be older than b.
func olderThan(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err == nil && cmp < 0
}

// after reports whether resource version a is later than b, or cannot be
// compared with it.
func after(a, b string) bool {
	cmp, err := resourceversion.CompareResourceVersion(a, b)
	return err != nil || cmp > 0
}
