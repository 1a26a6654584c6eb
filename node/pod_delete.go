package node

import (
	"context"
	"errors"
	"fmt"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

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
	if rec.view().objectDeleted == pod.UID {
		return nil // the informer has not seen our delete yet
	}
	// The provider's terminal status must reach the API server first.
	if pp := rec.view().provider; pp != nil && pp.UID == pod.UID && isTerminalStatus(&pp.Status) && !isTerminalStatus(rec.freshestStatus(pod)) {
		pc.statusQueue.Enqueue(key)
		return errTerminalStatusPending
	}
	ctx = withPodFields(ctx, pod)
	// Recorded before the request: the object's delete event can reach the
	// sync queue before the request returns, and must find the pod stopped.
	rec.objectDeleted(pod.UID)
	err = pc.writer.remove(ctx, pod)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return nil // gone, or a new pod of the same name that is not ours to delete
	}
	if err != nil {
		rec.objectDeleted("")
		return fmt.Errorf("deleting pod: %w", err)
	}
	log.G(ctx).Debug("pod deleted")
	return nil
}

// errTerminalStatusPending makes the delete queue retry a pod whose
// terminal status is still being written.
var errTerminalStatusPending = errors.New("the pod's terminal status is not written yet")
