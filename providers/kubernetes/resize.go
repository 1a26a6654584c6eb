package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/util/retry"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

var _ node.PodResizer = (*Provider)(nil)

// remoteResizeWait bounds how long ResizePod waits for B's node to act on a
// resize before answering Deferred (and being asked again).
const remoteResizeWait = 5 * time.Second

// ResizePod implements node.PodResizer by resizing B's pod through B's own
// resize subresource, and answers what B's node made of it: B's
// PodResizePending (Deferred or Infeasible, with B's message) as is,
// B's PodResizeInProgress as in progress (done once B's
// containerStatuses[].resources, which GetPodStatus reports, match), and
// done when B runs the pod with the new resources. A resize the policy or
// B's API server refuses (a quota or LimitRange of B, a node of B without
// in-place resize) is Infeasible with the reason; one B's node has not
// acted on within remoteResizeWait is Deferred, so it is asked again.
func (p *Provider) ResizePod(ctx context.Context, req node.ResizeRequest) (node.ResizeResult, error) {
	if req.Pod == nil {
		return node.ResizeResult{}, errdefs.InvalidInput("ResizePod: the request has no pod")
	}
	// The resized pod crosses the trust boundary like a new one.
	want, err := p.remotePod(req.Pod)
	if errdefs.IsInvalidInput(err) {
		return node.ResizeResult{Outcome: node.ResizeInfeasible, Message: err.Error()}, nil
	}
	if err != nil {
		return node.ResizeResult{}, err
	}
	generation, err := p.resizeRemote(ctx, req.Pod, want)
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsForbidden(err) || errdefs.IsInvalidInput(err):
		return node.ResizeResult{Outcome: node.ResizeInfeasible, Message: "the remote cluster refused the resize: " + statusMessage(err)}, nil
	case err != nil:
		return node.ResizeResult{}, err
	}
	return p.awaitRemoteResize(ctx, req.Pod, want, generation)
}

// statusMessage is the API server's message of err, or err's text.
func statusMessage(err error) string {
	if s, ok := err.(apierrors.APIStatus); ok && s.Status().Message != "" {
		return s.Status().Message
	}
	return err.Error()
}

// resizeRemote writes want's resources to B's pod of source through the
// resize subresource, and returns the generation B gave the resized pod.
// A conflict (B's node wrote the status meanwhile) is retried on a fresh
// copy.
func (p *Provider) resizeRemote(ctx context.Context, source, want *corev1.Pod) (int64, error) {
	current, err := p.remoteFor(source.Namespace, source.Name)
	if err != nil {
		return 0, err
	}
	if current.Labels[LabelSourceUID] != string(source.UID) {
		return 0, errdefs.NotFoundf("pod %s/%s of UID %s is not in the remote cluster", source.Namespace, source.Name, source.UID)
	}
	pods := p.remote.CoreV1().Pods(current.Namespace)
	var generation int64
	err = retry.RetryOnConflict(retry.DefaultRetry, func() error {
		fresh, err := pods.Get(ctx, current.Name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if fresh.UID != current.UID {
			return errdefs.NotFoundf("pod %s/%s was replaced in the remote cluster", current.Namespace, current.Name)
		}
		if err := withResources(fresh, want); err != nil {
			return err
		}
		updated, err := pods.UpdateResize(ctx, fresh.Name, fresh, metav1.UpdateOptions{})
		if err == nil {
			generation = updated.Generation
		}
		return err
	})
	return generation, err
}

// withResources sets the resources of remote's containers and its
// pod-level resources to want's, which is B's pod of the same source.
func withResources(remote, want *corev1.Pod) error {
	for _, lists := range [][2][]corev1.Container{
		{remote.Spec.InitContainers, want.Spec.InitContainers},
		{remote.Spec.Containers, want.Spec.Containers},
	} {
		for i := range lists[0] {
			c := findContainer(lists[1], lists[0][i].Name)
			if c == nil {
				return errdefs.InvalidInputf("container %q of the remote pod %s/%s is not in the pod resized", lists[0][i].Name, remote.Namespace, remote.Name)
			}
			lists[0][i].Resources = *c.Resources.DeepCopy()
		}
	}
	remote.Spec.Resources = want.Spec.Resources.DeepCopy()
	return nil
}

func findContainer(list []corev1.Container, name string) *corev1.Container {
	for i := range list {
		if list[i].Name == name {
			return &list[i]
		}
	}
	return nil
}

// awaitRemoteResize waits, in B's informer, until B's node acted on the
// resize of generation and returns its outcome.
func (p *Provider) awaitRemoteResize(ctx context.Context, source, want *corev1.Pod, generation int64) (node.ResizeResult, error) {
	var result node.ResizeResult
	err := wait.PollUntilContextTimeout(ctx, 50*time.Millisecond, remoteResizeWait, true, func(context.Context) (bool, error) {
		remote, err := p.remoteFor(source.Namespace, source.Name)
		if err != nil {
			return false, err
		}
		var acted bool
		result, acted = remoteResizeOutcome(remote, want, generation)
		return acted, nil
	})
	switch {
	case wait.Interrupted(err) && ctx.Err() == nil:
		return node.ResizeResult{Outcome: node.ResizeDeferred, Message: fmt.Sprintf("the remote cluster's node has not acted on the resize within %s", remoteResizeWait)}, nil
	case err != nil:
		return node.ResizeResult{}, err
	}
	return result, nil
}

// remoteResizeOutcome is what B's node made of the resize of B's pod
// remote to want's resources, at remote's generation: false while B's
// node has not acted on that generation (status.observedGeneration).
func remoteResizeOutcome(remote, want *corev1.Pod, generation int64) (node.ResizeResult, bool) {
	if remote.Status.ObservedGeneration < generation {
		return node.ResizeResult{}, false
	}
	for _, c := range remote.Status.Conditions {
		if c.Status != corev1.ConditionTrue {
			continue
		}
		switch {
		case c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonInfeasible:
			return node.ResizeResult{Outcome: node.ResizeInfeasible, Message: "remote cluster: " + c.Message}, true
		case c.Type == corev1.PodResizePending && c.Reason == corev1.PodReasonDeferred:
			return node.ResizeResult{Outcome: node.ResizeDeferred, Message: "remote cluster: " + c.Message}, true
		case c.Type == corev1.PodResizeInProgress:
			return node.ResizeResult{Outcome: node.ResizeInProgress}, true
		}
	}
	if runsWithResources(remote, want) {
		return node.ResizeResult{Outcome: node.ResizeDone}, true
	}
	return node.ResizeResult{Outcome: node.ResizeInProgress}, true
}

// runsWithResources reports whether B reports remote's running containers
// with want's CPU and memory.
func runsWithResources(remote, want *corev1.Pod) bool {
	return statusesRunWith(remote.Status.InitContainerStatuses, want.Spec.InitContainers) &&
		statusesRunWith(remote.Status.ContainerStatuses, want.Spec.Containers)
}

// statusesRunWith reports whether the running containers of statuses run
// with the CPU and memory of their namesakes in containers.
func statusesRunWith(statuses []corev1.ContainerStatus, containers []corev1.Container) bool {
	for _, cs := range statuses {
		c := findContainer(containers, cs.Name)
		if c == nil || cs.State.Running == nil {
			continue // only running containers report their resources
		}
		if cs.Resources == nil || !sameCPUAndMemory(c.Resources, *cs.Resources) {
			return false
		}
	}
	return true
}

// sameCPUAndMemory reports whether a and b agree on the resources a resize
// changes.
func sameCPUAndMemory(a, b corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		for _, lists := range [][2]corev1.ResourceList{{a.Requests, b.Requests}, {a.Limits, b.Limits}} {
			qa, oka := lists[0][name]
			qb, okb := lists[1][name]
			if oka != okb || qa.Cmp(qb) != 0 {
				return false
			}
		}
	}
	return true
}
