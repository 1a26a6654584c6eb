package node

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// RuntimeFeatures are what a provider's containers can be given that a pod
// may ask for and a kubelet learns from its container runtime; the Node
// shows them in status.runtimeHandlers[].features.
type RuntimeFeatures struct {
	// UserNamespaces: a pod with hostUsers: false runs in a user
	// namespace of its own (user namespaces, GA in 1.36).
	UserNamespaces bool
	// RecursiveReadOnlyMounts: a read-only volume mount with
	// recursiveReadOnly Enabled is read-only all the way down.
	RecursiveReadOnlyMounts bool
}

// RuntimeFeaturesDeclarer is a provider that says which RuntimeFeatures
// its containers have; a provider without it has none, and the pods that
// need one are refused as a kubelet refuses them (see podRefusalOf).
type RuntimeFeaturesDeclarer interface {
	RuntimeFeatures() RuntimeFeatures
}

// RuntimeHandlers is the Node's status.runtimeHandlers as a kubelet writes
// it for a runtime with only its default handler (named ""): what it can
// give pods that name no RuntimeClass.
func (f RuntimeFeatures) RuntimeHandlers() []corev1.NodeRuntimeHandler {
	userns, rro := f.UserNamespaces, f.RecursiveReadOnlyMounts
	return []corev1.NodeRuntimeHandler{{
		Name:     "",
		Features: &corev1.NodeRuntimeHandlerFeatures{UserNamespaces: &userns, RecursiveReadOnlyMounts: &rro},
	}}
}

// reasonContainerCreating is the kubelet's waiting reason for a container
// whose pod's sandbox is not there yet.
const reasonContainerCreating = "ContainerCreating"

// podRefusal is why the node cannot start a pod at all, and how the
// kubelet says so: an Event, and the pod Pending with its containers
// waiting for the reason. The kubelet retries such a pod for as long as it
// exists, since its runtime may change; a provider's capabilities are
// fixed while the daemon runs, so the pod is looked at again when it
// changes or the daemon restarts.
type podRefusal struct {
	// event is the Event's reason, message its message.
	event, message string
	// waiting is the containers' waiting reason.
	waiting string
}

// podRefusalOf returns why a node whose provider has caps cannot start
// pod, nil when it can, with the kubelet's words for each:
//   - hostUsers: false without UserNamespaces: the kubelet cannot create
//     the pod's sandbox (FailedCreatePodSandBox);
//   - a volume mount asking recursiveReadOnly Enabled without
//     RecursiveReadOnlyMounts: it cannot configure the container
//     (CreateContainerConfigError);
//   - ResourceClaims the pod needs, on a provider without devices
//     (DeviceProvider): no driver can prepare them
//     (FailedPrepareDynamicResources).
func podRefusalOf(pod *corev1.Pod, caps *Capabilities) *podRefusal {
	if pod.Spec.HostUsers != nil && !*pod.Spec.HostUsers && !caps.Runtime.UserNamespaces {
		return &podRefusal{event: ReasonFailedCreatePodSandBox, waiting: reasonContainerCreating,
			message: "Failed to create pod sandbox: can't set `spec.hostUsers: false`, runtime does not support user namespaces"}
	}
	if !caps.Runtime.RecursiveReadOnlyMounts {
		for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
			for _, c := range list {
				for _, m := range c.VolumeMounts {
					if m.RecursiveReadOnly != nil && *m.RecursiveReadOnly == corev1.RecursiveReadOnlyEnabled {
						return &podRefusal{event: ReasonFailed, waiting: ReasonCreateContainerConfigError,
							message: fmt.Sprintf("Error: volume %q requested recursive read-only mode, but it is not supported by the runtime", m.Name)}
					}
				}
			}
		}
	}
	if caps.Devices == nil {
		if name := neededClaim(pod); name != "" {
			return &podRefusal{event: ReasonFailedPrepareDevices, waiting: reasonContainerCreating,
				message: fmt.Sprintf("Failed to prepare dynamic resources: ResourceClaim %s: the node's provider has no devices (Dynamic Resource Allocation), so no driver can prepare it here", name)}
		}
	}
	return nil
}

// neededClaim is the name of the first ResourceClaim pod needs (one of
// its own, or one made from a template for it; a template's not made yet
// by its pod's name), "" when it needs none.
func neededClaim(pod *corev1.Pod) string {
	for i := range pod.Spec.ResourceClaims {
		pc := &pod.Spec.ResourceClaims[i]
		name, _, err := resourceclaim.Name(pod, pc)
		switch {
		case err != nil:
			return pc.Name // not made yet: needed all the same
		case name != nil:
			return *name
		}
	}
	return ""
}

// refuse reports whether pod is refused (podRefusalOf), and if so says so
// as the kubelet does: the Event, and the pod Pending, its containers
// waiting with the reason's message.
func (pc *PodController) refuse(ctx context.Context, pod *corev1.Pod, rec *podRecord) bool {
	r := podRefusalOf(pod, &pc.caps)
	if r == nil {
		return false
	}
	log.G(ctx).WithField("reason", r.event).Warn(r.message)
	pc.recorder.Event(pod, corev1.EventTypeWarning, r.event, r.message)
	status := rec.freshestStatus(pod).DeepCopy()
	status.Phase = corev1.PodPending
	status.InitContainerStatuses = waitingStatuses(pod.Spec.InitContainers, r.waiting, r.message)
	appWaiting := r.waiting
	if appWaiting == reasonContainerCreating && len(pod.Spec.InitContainers) > 0 {
		appWaiting = "PodInitializing" // the kubelet's, for containers after init ones
	}
	status.ContainerStatuses = waitingStatuses(pod.Spec.Containers, appWaiting, r.message)
	pc.queueStatus(pod, *status)
	return true
}
