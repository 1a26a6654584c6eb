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
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node/internal/perpod"
	"github.com/vkubelet/virtual-kubelet/node/internal/smpatch"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// syncPodStatusFromProvider writes the provider's latest status of a pod to
// Kubernetes, and once a deleting pod's terminal status is there, removes the
// object. A deleting pod the provider has not confirmed stopped by
// its stop deadline gets a terminal status from the controller. A failed
// write is retried until it succeeds, so a terminal status is never lost,
// even across an API server outage.
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

	current := rec.freshestStatus(pod)
	pp := rec.view().providerViewOf(pod.UID)
	if pod.DeletionTimestamp != nil && !isTerminalStatus(current) && (pp == nil || !isTerminalStatus(&pp.Status)) &&
		!time.Now().Before(pc.stopDeadline(pod, rec)) {
		pp = pc.stopUnconfirmed(ctx, pod, rec, current)
	}
	var status corev1.PodStatus
	var settled resizeSettlement
	st := rec.view()
	if pp != nil {
		status, settled = withResizeStatus(pod, st, mergeStatus(*current, withKubeletConditions(pod, *current, withStopSignals(pod, pc.probed(pod, pp.Status)), metav1.Now())), current, true)
		status = withObservedGeneration(status, current, generationToObserve(pod, st, true))
	} else {
		// Nothing new from the provider: a status is due only when the
		// resize state or the generation acted on changes what Kubernetes
		// shows.
		status, settled = withResizeStatus(pod, st, *current, current, false)
		status = withObservedGeneration(status, current, generationToObserve(pod, st, false))
		if !statusEqual(&status, current) {
			pp = withStatus(pod, *current)
		}
	}
	if pp != nil {
		if err := pc.writeStatus(ctx, pod, rec, pp, status); err != nil {
			return err
		}
		current = &status
	}
	settled.record(rec)
	if isTerminalPhase(current.Phase) {
		pc.ended(key, perpod.Finished) // a finished pod's sandbox is gone
	}
	if pod.DeletionTimestamp != nil && isTerminalStatus(current) {
		// Removed in the same sync as its terminal status is written, as the
		// kubelet's status manager does: the one place a pod object is
		// removed. A failure is retried with the sync.
		return pc.removeObject(ctx, pod, rec)
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

// writeStatus patches the pod's status to status, made from the provider's
// view pp, unless it is already so. The patch is computed against the
// freshest status we know (the informer's, or our last write's if the
// informer has not caught up), carries the pod's UID as a precondition, and,
// being a patch, cannot conflict.
func (pc *PodController) writeStatus(ctx context.Context, pod *corev1.Pod, rec *podRecord, pp *corev1.Pod, status corev1.PodStatus) error {
	patch, err := statusPatch(pod.UID, rec.freshestStatus(pod), &status)
	if err != nil {
		return err
	}
	if patch == nil {
		rec.statusWritten(pp, nil)
		return nil
	}
	resourceVersion, err := pc.writer.patchStatus(ctx, pod, patch)
	if err != nil {
		return fmt.Errorf("writing pod status: %w", err)
	}
	rec.statusWritten(pp, &patchedStatus{resourceVersion: resourceVersion, status: status})
	// Under load the informer can deliver our write before we get here; no
	// later event would then drop the record, and every pod would keep a
	// copy of its status. The cache is updated before handlers run, so
	// checking it after recording leaves no gap.
	if cur, err := pc.lister.Pods(pod.Namespace).Get(pod.Name); err == nil {
		rec.informerSaw(cur.ResourceVersion)
	}
	log.G(ctx).WithField("phase", status.Phase).Debug("pod status written")
	return nil
}

// mergeStatus is the status to write: the provider's, keeping what the
// provider leaves unset (conditions of other owners such as PodScheduled, the
// QoS class, start time) from the current one, and the ResourceClaims'
// statuses as they are. A finished pod stays finished.
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
	// The claims' statuses are the resourceclaim controller's, as on a
	// kubelet: never the provider's to change.
	s.ResourceClaimStatuses = current.ResourceClaimStatuses
	s.ExtendedResourceClaimStatus = current.ExtendedResourceClaimStatus
	s.NodeAllocatableResourceClaimStatuses = current.NodeAllocatableResourceClaimStatuses
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

// statusPatch is the strategic merge patch of the pod's status from base
// to status, or nil when they do not differ. The UID, only in the patch,
// makes the API server refuse it for a pod deleted and created again under
// the same name.
func statusPatch(uid types.UID, base, status *corev1.PodStatus) ([]byte, error) {
	diff, err := smpatch.Diff(base, status)
	if errors.Is(err, smpatch.ErrUnsupported) {
		return jsonStatusPatch(uid, base, status)
	}
	if err != nil || string(diff) == "{}" {
		return nil, err
	}
	id, err := json.Marshal(uid)
	if err != nil {
		return nil, err
	}
	return fmt.Appendf(nil, `{"metadata":{"uid":%s},"status":%s}`, id, diff), nil
}

// jsonStatusPatch is statusPatch by the JSON round trip, for the fields
// smpatch does not patch.
func jsonStatusPatch(uid types.UID, base, status *corev1.PodStatus) ([]byte, error) {
	oldJSON, err := json.Marshal(corev1.Pod{Status: *base})
	if err != nil {
		return nil, err
	}
	newJSON, err := json.Marshal(corev1.Pod{Status: *status})
	if err != nil {
		return nil, err
	}
	if bytes.Equal(oldJSON, newJSON) {
		return nil, nil
	}
	newJSON, err = json.Marshal(corev1.Pod{ObjectMeta: metav1.ObjectMeta{UID: uid}, Status: *status})
	if err != nil {
		return nil, err
	}
	return strategicpatch.CreateTwoWayMergePatch(oldJSON, newJSON, corev1.Pod{})
}

// statusEqual compares statuses as the API server stores them (times to the
// second), so a provider's nanoseconds do not look like a change.
func statusEqual(a, b *corev1.PodStatus) bool {
	patch, err := statusPatch("", a, b)
	return err == nil && patch == nil
}
