package node

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// deletePodFromKubernetes is the delete queue's handler: the pod is handed
// to the status sync, which removes a deleting pod once its terminal status
// is written (removeObject), so that the object is removed in one place.
func (pc *PodController) deletePodFromKubernetes(_ context.Context, key string) error {
	pc.statusQueue.Enqueue(key)
	return nil
}

// removeObject removes a deleting pod whose terminal status is written:
// grace period 0, and only this pod (UID precondition), as the kubelet
// finishes a deletion.
func (pc *PodController) removeObject(ctx context.Context, pod *corev1.Pod, rec *podRecord) error {
	if rec.view().objectDeleted == pod.UID {
		return nil // the informer has not seen our delete yet
	}
	// Recorded before the request: the object's delete event can reach the
	// sync queue before the request returns, and must find the pod stopped.
	rec.objectDeleted(pod.UID)
	err := pc.writer.remove(ctx, pod)
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
