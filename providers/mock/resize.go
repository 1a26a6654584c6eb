package mock

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// Pod annotations that script how the mock answers an in-place resize
// (`kubectl patch --subresource resize`). Without them a resize is applied
// at once, restarting the containers whose resizePolicy asks for it.
const (
	// AnnotationResize is the mock's answer to the pod's resizes: "apply"
	// (the default), "defer" (the resize waits, proposed again until the
	// annotation says "apply") or "refuse" (infeasible).
	AnnotationResize = "mock.vkubelet.io/resize"
	// AnnotationResizeDelay keeps an applied resize in progress for a
	// duration, e.g. "2s", before the containers run with the new
	// resources.
	AnnotationResizeDelay = "mock.vkubelet.io/resize-delay"
)

// resizeAnswer is a scripted answer to a resize.
type resizeAnswer int

const (
	resizeApply resizeAnswer = iota
	resizeDefer
	resizeRefuse
)

// resizeScript is how the mock answers a pod's resizes.
type resizeScript struct {
	answer resizeAnswer
	delay  time.Duration
}

// parseResizeScript reads a pod's resize script; a bad value is an
// InvalidInput error naming the annotation.
func parseResizeScript(annotations map[string]string) (resizeScript, error) {
	var s resizeScript
	switch v, ok := annotations[AnnotationResize]; {
	case !ok || v == "apply":
	case v == "defer":
		s.answer = resizeDefer
	case v == "refuse":
		s.answer = resizeRefuse
	default:
		return s, errdefs.InvalidInputf("annotation %s: %q is not one of apply, defer, refuse", AnnotationResize, v)
	}
	if v, ok := annotations[AnnotationResizeDelay]; ok {
		d, err := parseDuration(AnnotationResizeDelay, v, 0)
		if err != nil {
			return s, err
		}
		s.delay = d
	}
	return s, nil
}

// ResizePod implements node.PodResizer: the resize is applied as the pod's
// annotations script it (AnnotationResize, AnnotationResizeDelay). A script
// made invalid after the pod started makes the resize infeasible, the
// message naming the annotation.
func (p *Provider) ResizePod(ctx context.Context, req node.ResizeRequest) (node.ResizeResult, error) {
	script, err := parseResizeScript(req.Pod.Annotations)
	switch {
	case err != nil:
		return node.ResizeResult{Outcome: node.ResizeInfeasible, Message: err.Error()}, nil
	case script.answer == resizeDefer:
		return node.ResizeResult{Outcome: node.ResizeDeferred, Message: fmt.Sprintf("the mock defers the resize (annotation %s: defer)", AnnotationResize)}, nil
	case script.answer == resizeRefuse:
		return node.ResizeResult{Outcome: node.ResizeInfeasible, Message: fmt.Sprintf("the mock refuses the resize (annotation %s: refuse)", AnnotationResize)}, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, ok := p.pods[podKey(req.Pod.Namespace, req.Pod.Name)]
	if !ok || ps.pod.uid != req.Pod.UID {
		return node.ResizeResult{}, errdefs.NotFoundf("pod %s/%s is not in the mock provider", req.Pod.Namespace, req.Pod.Name)
	}
	for _, ch := range req.Containers {
		if ps.container(ch.Name) == nil {
			return node.ResizeResult{}, errdefs.InvalidInputf("container %q is not in pod %s/%s", ch.Name, req.Pod.Namespace, req.Pod.Name)
		}
	}
	if ps.resizeTimer != nil {
		ps.resizeTimer.Stop() // the newer resize supersedes it
	}
	if script.delay == 0 {
		ps.resize(req)
		p.changed(ps)
		p.persist(ctx, p.state.updated(ps))
		return node.ResizeResult{Outcome: node.ResizeDone}, nil
	}
	for _, ch := range req.Containers {
		ps.container(ch.Name).resizeTo = ch.To.DeepCopy()
	}
	if req.PodLevel != nil {
		ps.resizeTo = req.PodLevel.To.DeepCopy()
	}
	ps.resizeTimer = ps.after(script.delay, func() {
		ps.resize(req)
		p.persist(context.WithoutCancel(ctx), p.state.updated(ps))
	})
	return node.ResizeResult{Outcome: node.ResizeInProgress}, nil
}

// resize gives the pod and its containers their new resources,
// restarting the containers the resize says.
func (ps *podState) resize(req node.ResizeRequest) {
	for _, ch := range req.Containers {
		if c := ps.container(ch.Name); c != nil {
			ps.setResources(c, ch.To, ch.Restart)
		}
	}
	if req.PodLevel != nil {
		ps.resources, ps.resizeTo = req.PodLevel.To.DeepCopy(), nil
	}
}

// setResources gives c resources, restarting it if restart is set.
func (ps *podState) setResources(c *containerState, r corev1.ResourceRequirements, restart bool) {
	c.spec.resources, c.status.Resources, c.resizeTo = *r.DeepCopy(), r.DeepCopy(), nil
	if restart {
		ps.restart(c)
	}
}

// updateResources applies the resources of pod's spec that the pod and its
// containers neither run with nor are being resized to: UpdatePod resizes as it does
// for a provider without node.PodResizer (a restored pod's updates). It reports whether any changed.
func (ps *podState) updateResources(pod *corev1.Pod) bool {
	changed := false
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for i := range list {
			spec := &list[i]
			c := ps.container(spec.Name)
			if c == nil || apiequality.Semantic.DeepEqual(c.spec.resources, spec.Resources) ||
				(c.resizeTo != nil && apiequality.Semantic.DeepEqual(*c.resizeTo, spec.Resources)) {
				continue
			}
			ps.setResources(c, spec.Resources, node.ResizeNeedsRestart(spec, c.spec.resources))
			changed = true
		}
	}
	if r := pod.Spec.Resources; r != nil && !apiequality.Semantic.DeepEqual(ps.resources, r) && !apiequality.Semantic.DeepEqual(ps.resizeTo, r) {
		ps.resources = r.DeepCopy()
		changed = true
	}
	return changed
}
