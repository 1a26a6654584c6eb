package node

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/resourceversion"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// syncPodStatusFromProvider writes the provider's latest status of a pod to
// Kubernetes, and once a deleting pod's terminal status is there, queues the
// object's removal. A failed write is retried until it succeeds, so a
// terminal status is never lost, even across an API server outage.
func (pc *PodController) syncPodStatusFromProvider(ctx context.Context, key string) error {
	pod, err := pc.cachedPod(key)
	if pod == nil {
		return err
	}
	rec := pc.pods.lookup(key)
	if rec == nil {
		return nil
	}
	ctx = withPodFields(ctx, pod)

	current := pc.freshestStatus(pod, rec)
	if pp := rec.providerPod(); pp != nil && (pp.UID == "" || pp.UID == pod.UID) {
		status := mergeStatus(*current, pp.Status)
		if err := pc.writeStatus(ctx, pod, rec, status); err != nil {
			return err
		}
		rec.written(pp)
		current = &status
	}
	if pod.DeletionTimestamp != nil && isTerminalStatus(current) {
		pc.deleteQueue.Enqueue(key)
	}
	return nil
}

// cachedPod returns the informer's pod for key, or nil when there is none
// (or the key is malformed, which the queues never hold).
func (pc *PodController) cachedPod(key string) (*corev1.Pod, error) {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		return nil, nil
	}
	pod, err := pc.lister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	return pod, err
}

// writeStatus patches the pod's status to status unless it is already so. The
// patch is computed against the freshest status we know (the informer's, or
// our last write's if the informer has not caught up), carries the pod's UID
// as a precondition, and, being a patch, cannot conflict.
func (pc *PodController) writeStatus(ctx context.Context, pod *corev1.Pod, rec *podRecord, status corev1.PodStatus) error {
	base := pc.freshestStatus(pod, rec)
	oldJSON, err := json.Marshal(corev1.Pod{Status: *base})
	if err != nil {
		return err
	}
	newJSON, err := json.Marshal(corev1.Pod{Status: status})
	if err != nil {
		return err
	}
	if bytes.Equal(oldJSON, newJSON) {
		return nil
	}
	// The UID only in the new object makes it part of the patch: a pod
	// deleted and created again under the same name is not patched.
	newJSON, err = json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: pod.UID}, Status: status})
	if err != nil {
		return err
	}
	patch, err := strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{})
	if err != nil {
		return err
	}
	updated, err := pc.client.Pods(pod.Namespace).Patch(ctx, pod.Name, types.StrategicMergePatchType, patch, metav1.PatchOptions{}, "status")
	if err != nil {
		return fmt.Errorf("writing pod status: %w", err)
	}
	rec.mu.Lock()
	rec.patched = &patchedStatus{resourceVersion: updated.ResourceVersion, status: updated.Status}
	rec.mu.Unlock()
	// Under load the informer can deliver our write before we get here; no
	// later event would then drop the record, and every pod would keep a
	// copy of its status. The cache is updated before handlers run, so
	// checking it after recording leaves no gap.
	if cur, err := pc.lister.Pods(pod.Namespace).Get(pod.Name); err == nil {
		rec.informerSaw(cur.ResourceVersion)
	}
	log.G(ctx).WithField("phase", updated.Status.Phase).Debug("pod status written")
	return nil
}

// freshestStatus returns the newest status we know the API server has: the
// informer's, or our last write's while the informer has not seen it yet.
func (pc *PodController) freshestStatus(pod *corev1.Pod, rec *podRecord) *corev1.PodStatus {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.patched == nil {
		return &pod.Status
	}
	cmp, err := resourceversion.CompareResourceVersion(rec.patched.resourceVersion, pod.ResourceVersion)
	if err == nil && cmp > 0 {
		return &rec.patched.status
	}
	rec.patched = nil // the informer has caught up
	return &pod.Status
}

// mergeStatus is the status to write: the provider's, keeping what the
// provider leaves unset (conditions of other owners such as PodScheduled, the
// QoS class, start time) from the current one. A finished pod stays finished.
func mergeStatus(current, provider corev1.PodStatus) corev1.PodStatus {
	if isTerminalPhase(current.Phase) && !isTerminalPhase(provider.Phase) {
		return current
	}
	s := *provider.DeepCopy()
	if s.Phase == "" {
		s.Phase = current.Phase
	}
	if s.QOSClass == "" {
		s.QOSClass = current.QOSClass
	}
	if s.StartTime == nil {
		s.StartTime = current.StartTime
	}
	if s.HostIP == "" {
		s.HostIP, s.HostIPs = current.HostIP, current.HostIPs
	}
	for _, c := range current.Conditions {
		if !hasCondition(s.Conditions, c.Type) {
			s.Conditions = append(s.Conditions, c)
		}
	}
	return s
}

func hasCondition(conds []corev1.PodCondition, t corev1.PodConditionType) bool {
	for _, c := range conds {
		if c.Type == t {
			return true
		}
	}
	return false
}

// isTerminalStatus reports whether a pod is done: its phase is terminal or
// all its containers have terminated.
func isTerminalStatus(s *corev1.PodStatus) bool {
	if isTerminalPhase(s.Phase) {
		return true
	}
	if len(s.ContainerStatuses) == 0 {
		return false
	}
	for _, c := range s.ContainerStatuses {
		if c.State.Terminated == nil {
			return false
		}
	}
	return true
}

// statusEqual compares statuses as the API server stores them (times to the
// second), so a provider's nanoseconds do not look like a change.
func statusEqual(a, b *corev1.PodStatus) bool {
	aj, err1 := json.Marshal(a)
	bj, err2 := json.Marshal(b)
	return err1 == nil && err2 == nil && bytes.Equal(aj, bj)
}

// deletePodFromKubernetes removes a deleting pod whose terminal status is
// written (or that the provider never had): grace period 0, and only this
// pod (UID precondition), as the kubelet finishes a deletion.
func (pc *PodController) deletePodFromKubernetes(ctx context.Context, key string) error {
	pod, err := pc.cachedPod(key)
	if pod == nil {
		return err
	}
	if pod.DeletionTimestamp == nil {
		return nil
	}
	rec := pc.pods.get(key)
	if rec.isObjectDeleted(pod.UID) {
		return nil // the informer has not seen our delete yet
	}
	// The provider's terminal status must reach the API server first.
	if pp := rec.providerPod(); pp != nil && pp.UID == pod.UID && isTerminalStatus(&pp.Status) && !isTerminalStatus(pc.freshestStatus(pod, rec)) {
		pc.statusQueue.Enqueue(key)
		return errTerminalStatusPending
	}
	ctx = withPodFields(ctx, pod)
	err = pc.client.Pods(pod.Namespace).Delete(ctx, pod.Name, metav1.DeleteOptions{
		GracePeriodSeconds: ptr.To[int64](0),
		Preconditions:      &metav1.Preconditions{UID: &pod.UID},
	})
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or a new pod of the same name that is not ours to delete
	}
	if err != nil {
		return fmt.Errorf("deleting pod: %w", err)
	}
	rec.setObjectDeleted(pod.UID)
	log.G(ctx).Debug("pod deleted")
	return nil
}

// errTerminalStatusPending makes the delete queue retry a pod whose
// terminal status is still being written.
var errTerminalStatusPending = errors.New("the pod's terminal status is not written yet")

// retryUntilPermanent retries a key as long as the error may pass (an API
// server outage, a timeout, throttling) and gives up only on errors that
// retrying cannot fix.
func retryUntilPermanent(_ context.Context, key string, timesTried int, _ time.Time, err error) (*time.Duration, error) {
	if apierrors.IsNotFound(err) || apierrors.IsInvalid(err) || apierrors.IsBadRequest(err) ||
		apierrors.IsMethodNotSupported(err) || errdefs.IsInvalidInput(err) {
		return nil, fmt.Errorf("giving up on %s after %d tries: %w", key, timesTried, err)
	}
	return nil, nil
}

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
		if applied, _ := rec.appliedPod(); applied == nil && pod.DeletionTimestamp == nil {
			continue // the provider was never given it
		}
		var status *corev1.PodStatus
		err := pc.traceProvider(ctx, "GetPodStatus", func(ctx context.Context) error {
			var err error
			status, err = pc.provider.GetPodStatus(ctx, pod.Namespace, pod.Name)
			return err
		})
		switch {
		case errdefs.IsNotFound(err) || (err == nil && status == nil):
			pc.providerLost(ctx, key, pod, rec)
		case err != nil:
			continue
		default:
			seen := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, Status: *status}
			old, _ := pc.LoadPod(key)
			pc.CheckAndUpdatePod(ctx, key, old, seen)
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
	has := make(map[string]bool, len(provided))
	for _, p := range provided {
		key := podKey(p)
		has[key] = true
		if _, err := pc.lister.Pods(p.Namespace).Get(p.Name); !apierrors.IsNotFound(err) {
			continue
		}
		if rec := pc.pods.lookup(key); rec != nil && rec.isProviderDeleted() {
			continue
		}
		log.G(withPodFields(ctx, p)).Info("deleting pod that no longer exists in Kubernetes from the provider")
		if err := pc.callProvider(withPodFields(ctx, p), "DeletePod", p, pc.provider.DeletePod); err != nil && !errdefs.IsNotFound(err) {
			continue
		}
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
		// Only a pod the provider had before the list was taken can be lost.
		if applied, at := rec.appliedPod(); applied == nil || at.After(started) {
			if pod.DeletionTimestamp == nil || !rec.isProviderDeleted() {
				continue
			}
		}
		_, err := pc.provider.GetPodStatus(ctx, pod.Namespace, pod.Name)
		if errdefs.IsNotFound(err) {
			pc.providerLost(withPodFields(ctx, pod), key, pod, rec)
		}
	}
}

// providerLost handles a pod the provider no longer has. A deleting pod is
// done with; a running one is marked Failed, its containers terminated with
// the kubelet's ContainerStatusUnknown.
func (pc *PodController) providerLost(ctx context.Context, key string, pod *corev1.Pod, rec *podRecord) {
	if pod.DeletionTimestamp != nil {
		pc.deleteQueue.Enqueue(key)
		return
	}
	current := pc.freshestStatus(pod, rec)
	if isTerminalStatus(current) {
		return
	}
	if pp := rec.providerPod(); pp != nil && isTerminalStatus(&pp.Status) {
		return // the terminal status is on its way
	}
	log.G(ctx).Warn("the provider lost the pod; marking it Failed")
	pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonProviderLost, "The pod is no longer in the provider")
	lost := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: pod.Namespace, Name: pod.Name, UID: pod.UID}, Status: lostStatus(*current)}
	pc.StorePod(key, lost)
	pc.statusQueue.Enqueue(key)
}

func lostStatus(s corev1.PodStatus) corev1.PodStatus {
	s = *s.DeepCopy()
	now := metav1.Now()
	s.Phase = corev1.PodFailed
	s.Reason = ReasonProviderLost
	s.Message = "The pod was not found in the provider; it may have been deleted there"
	for i := range s.ContainerStatuses {
		c := &s.ContainerStatuses[i]
		if c.State.Terminated != nil {
			continue
		}
		started := metav1.Time{}
		if c.State.Running != nil {
			started = c.State.Running.StartedAt
		}
		c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
			ExitCode:    137,
			Reason:      "ContainerStatusUnknown",
			Message:     "The container could not be located when the pod was terminated",
			StartedAt:   started,
			FinishedAt:  now,
			ContainerID: c.ContainerID,
		}}
		c.Ready = false
		c.Started = ptr.To(false)
	}
	for i := range s.Conditions {
		if t := s.Conditions[i].Type; t == corev1.PodReady || t == corev1.ContainersReady {
			s.Conditions[i].Status = corev1.ConditionFalse
			s.Conditions[i].LastTransitionTime = now
		}
	}
	return s
}
