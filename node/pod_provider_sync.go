package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// pollStatuses asks a provider without PodNotifier for the status of every
// pod it was given, and feeds changes into the status queue.
func (pc *PodController) pollStatuses(ctx context.Context) {
	pods, err := pc.lister.List(labels.Everything())
	if err != nil {
		log.G(ctx).WithError(err).Error("listing pods to poll")
		return
	}
	for _, pod := range pods {
		if ctx.Err() != nil {
			return
		}
		if !pc.accept(ctx, pod) {
			continue
		}
		key := podKey(pod)
		rec := pc.pods.lookup(key)
		if rec == nil {
			continue
		}
		if rec.view().applied == nil && pod.DeletionTimestamp == nil {
			continue // the provider was never given it
		}
		status, err := pc.getPodStatus(ctx, pod)
		switch {
		case errdefs.IsNotFound(err) || (err == nil && status == nil):
			pc.lost(ctx, key, pod, rec)
		case err != nil:
			continue
		default:
			pc.providerSaw(key, rec.view().provider, withStatus(pod, *status))
		}
	}
}

// resyncWithProvider compares the provider's pods with Kubernetes': pods only
// the provider has are deleted from it; pods it was given but no longer has
// are lost.
func (pc *PodController) resyncWithProvider(ctx context.Context) {
	started := time.Now()
	var provided []*corev1.Pod
	err := pc.traceProvider(ctx, "GetPods", func(ctx context.Context) error {
		var err error
		provided, err = pc.provider.GetPods(ctx)
		return err
	})
	if err != nil {
		return
	}
	keys := make([]string, 0, len(provided))
	for _, p := range provided {
		if p != nil {
			keys = append(keys, podKey(p))
		}
	}
	pc.listing.Taken(keys, func(key string) bool {
		rec := pc.pods.lookup(key)
		return rec != nil && rec.view().sighted
	})
	has := make(map[string]bool, len(provided))
	for _, p := range provided {
		if p == nil {
			continue
		}
		key := podKey(p)
		has[key] = true
		if _, err := pc.lister.Pods(p.Namespace).Get(p.Name); !apierrors.IsNotFound(err) {
			continue
		}
		// Run starts this loop only once the informers have synced, so a pod
		// missing from the lister is not merely unseen yet.
		if rec := pc.pods.lookup(key); rec != nil && !rec.view().mayBeOrphan() {
			continue
		}
		log.G(withPodFields(ctx, p)).Info("deleting pod that no longer exists in Kubernetes from the provider")
		if err := pc.callProvider(withPodFields(ctx, p), "DeletePod", p, pc.provider.DeletePod); err != nil && !errdefs.IsNotFound(err) {
			continue
		}
		pc.listing.Dropped(key)
	}

	pods, err := pc.lister.List(labels.Everything())
	if err != nil {
		return
	}
	for _, pod := range pods {
		key := podKey(pod)
		if has[key] || !pc.accept(ctx, pod) {
			continue
		}
		rec := pc.pods.lookup(key)
		if rec == nil {
			continue
		}
		if !rec.view().mayBeLost(pod.DeletionTimestamp != nil, started) {
			continue
		}
		if _, err := pc.getPodStatus(ctx, pod); errdefs.IsNotFound(err) {
			pc.lost(withPodFields(ctx, pod), key, pod, rec)
		}
	}
}

// lost handles a pod the provider no longer has, found by polling or
// resync: one to be created again is queued for it. The caller's pod comes
// from a list taken before the provider was asked; the cache's is used
// instead, as its terminal status may have been written in between (and
// the record's copy of it dropped once the informer had it).
func (pc *PodController) lost(ctx context.Context, key string, pod *corev1.Pod, rec *podRecord) {
	cur, err := pc.cachedPod(key)
	if cur == nil || err != nil || cur.UID != pod.UID {
		return // gone since, or another pod of the name now
	}
	if pc.providerLost(ctx, key, cur, rec) {
		pc.syncQueue.Enqueue(key)
	}
}

// providerLost handles a pod the provider no longer has, unless its
// terminal status is already known: as its restart policy decides (onLoss),
// it is to be created again, with its containers' restarts counted, or it
// is marked Failed, its containers terminated with the kubelet's
// ContainerStatusUnknown. A deleting pod is then removed, as the status
// handler removes any deleting pod that is done. It reports whether the pod
// is to be created again.
func (pc *PodController) providerLost(ctx context.Context, key string, pod *corev1.Pod, rec *podRecord) (recreate bool) {
	current := rec.freshestStatus(pod)
	if isTerminalStatus(current) {
		if pod.DeletionTimestamp != nil {
			pc.statusQueue.Enqueue(key) // which removes it
		}
		return false
	}
	if pp := rec.view().providerViewOf(pod.UID); pp != nil && isTerminalStatus(&pp.Status) {
		pc.statusQueue.Enqueue(key) // the terminal status is on its way
		return false
	}
	if onLoss(pod, current) == lossRestarts {
		log.G(ctx).Warn("the provider lost the pod; creating it again")
		pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonProviderLost,
			"Pod lost by the provider, it will be re-created (restartPolicy %s).", pod.Spec.RestartPolicy)
		rec.lostRestarting(restartsAfterLoss(pod, current, metav1.Now()))
		return true
	}
	log.G(ctx).Warn("the provider lost the pod; marking it Failed")
	pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonProviderLost, "The pod is no longer in the provider")
	pc.queueStatus(pod, terminatedStatus(pod, *current,
		ReasonProviderLost, "The pod was not found in the provider; it may have been deleted there",
		"ContainerStatusUnknown", "The container could not be located when the pod was terminated"))
	return false
}

// getPodStatus asks the provider for a pod's status, in a span.
func (pc *PodController) getPodStatus(ctx context.Context, pod *corev1.Pod) (*corev1.PodStatus, error) {
	var status *corev1.PodStatus
	err := pc.traceProvider(ctx, "GetPodStatus", func(ctx context.Context) error {
		var err error
		status, err = pc.provider.GetPodStatus(ctx, pod.Namespace, pod.Name)
		return err
	})
	return status, err
}
