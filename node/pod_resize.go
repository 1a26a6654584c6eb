package node

import (
	"context"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	resourcehelper "k8s.io/component-helpers/resource"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// In-place pod resize (KEP 1287), as the kubelet does it: the resources a
// pod's containers were given (its allocation) are what the provider runs
// them with, and what CreatePod and UpdatePod see in the pod's spec. A
// `kubectl patch --subresource resize` changes the spec; the controller
// then asks the provider (PodResizer) whether it can, and reports the
// outcome as the kubelet does: containerStatuses[].allocatedResources and
// .resources, and the PodResizePending (Deferred, Infeasible) and
// PodResizeInProgress conditions.

// DeferredResizeRetryInterval is how often a resize the provider deferred
// is proposed again, while nothing else about the pod changes.
const DeferredResizeRetryInterval = 10 * time.Second

// ResizeOutcome is what a PodResizer made of a resize.
type ResizeOutcome int

const (
	// ResizeDone means the pod runs with the new resources.
	ResizeDone ResizeOutcome = iota + 1
	// ResizeInProgress means the provider accepted the resize and applies it;
	// it reports containerStatuses[].resources as they are applied, and
	// the resize is done once they match the new resources.
	ResizeInProgress
	// ResizeDeferred means the resize could be made, but not now (the node is
	// short of resources); it is proposed again later.
	ResizeDeferred
	// ResizeInfeasible means the resize can never be made as it is; it is not
	// proposed again until the pod's resources change again.
	ResizeInfeasible
)

// String is the outcome's name.
func (o ResizeOutcome) String() string {
	switch o {
	case ResizeDone:
		return "Done"
	case ResizeInProgress:
		return "InProgress"
	case ResizeDeferred:
		return corev1.PodReasonDeferred
	case ResizeInfeasible:
		return corev1.PodReasonInfeasible
	}
	return fmt.Sprintf("ResizeOutcome(%d)", int(o))
}

// ResizeResult is a PodResizer's answer to a resize.
type ResizeResult struct {
	Outcome ResizeOutcome
	// Message says why a resize is deferred or infeasible; it is the
	// PodResizePending condition's message.
	Message string
}

// ResizeRequest is a resize the controller asks a PodResizer to make.
type ResizeRequest struct {
	// Pod is the pod as Kubernetes has it, its spec resized; read only.
	Pod *corev1.Pod
	// Containers are the containers whose resources change (app
	// containers and sidecars), in the pod's order.
	Containers []ContainerResize
	// PodLevel, when set, is the change of the pod-level resources
	// (spec.resources).
	PodLevel *PodLevelResize
}

// PodLevelResize is the change of a pod's pod-level resources.
type PodLevelResize struct {
	From, To corev1.ResourceRequirements
}

// ContainerResize is one container's part of a resize.
type ContainerResize struct {
	Name string
	// From are the resources the container runs with, To the new ones.
	From, To corev1.ResourceRequirements
	// Restart is set when the container's resizePolicy says a changed
	// resource needs a restart (RestartContainer): the provider restarts
	// it to apply the resize, counting the restart in its status.
	Restart bool
}

// podAllocation is, by container name, the resources the provider was
// given for a pod's containers, and under podLevel its pod-level ones
// (spec.resources), if it has any: the kubelet's allocated resources. Every
// pod has one, and has a few containers: a slice is a tenth of a map's
// size. nil is no allocation.
type podAllocation []allocated

// allocated is the resources allocated to a container, or to the pod.
type allocated struct {
	name      string
	resources corev1.ResourceRequirements
}

// of returns the resources allocated to the container name, or under
// podLevel to the pod.
func (a podAllocation) of(name string) (corev1.ResourceRequirements, bool) {
	for _, c := range a {
		if c.name == name {
			return c.resources, true
		}
	}
	return corev1.ResourceRequirements{}, false
}

// set allocates r to the container name (or the pod), which a has.
func (a podAllocation) set(name string, r corev1.ResourceRequirements) {
	for i := range a {
		if a[i].name == name {
			a[i].resources = r
		}
	}
}

// podLevel is the allocation's key of the pod-level resources: no
// container is named "".
const podLevel = ""

// allocationOf is the allocation of a pod given to the provider as its
// spec is. It shares the resource lists of pod, which is the informer's:
// an allocation, like a cached pod, is never changed in place (with and
// applyTo copy), and keeping the lists costs nothing while the pod keeps
// them too.
func allocationOf(pod *corev1.Pod) podAllocation {
	a := make(podAllocation, 0, len(pod.Spec.InitContainers)+len(pod.Spec.Containers)+1)
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			a = append(a, allocated{c.Name, c.Resources})
		}
	}
	if pod.Spec.Resources != nil {
		a = append(a, allocated{podLevel, *pod.Spec.Resources})
	}
	return a
}

// allocationFromStatus is the allocation a previous run of the controller
// reported for pod (a daemon restart keeps no other record of it): the
// requests in allocatedResources, the limits in resources, and the spec's
// for containers without them.
func allocationFromStatus(pod *corev1.Pod) podAllocation {
	a := allocationOf(pod)
	for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
		for _, cs := range list {
			r, ok := a.of(cs.Name)
			if !ok || cs.AllocatedResources == nil {
				continue
			}
			r.Requests = cs.AllocatedResources
			if cs.Resources != nil {
				r.Limits = cs.Resources.Limits
			}
			a.set(cs.Name, r)
		}
	}
	if r, ok := a.of(podLevel); ok && pod.Status.AllocatedResources != nil && pod.Status.Resources != nil {
		r.Requests, r.Limits = pod.Status.AllocatedResources, pod.Status.Resources.Limits
		a.set(podLevel, r)
	}
	return a
}

// changes are the container resizes that take a's containers to pod's
// spec.
func (a podAllocation) changes(pod *corev1.Pod) []ContainerResize {
	var out []ContainerResize
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			from, ok := a.of(c.Name)
			if !ok || apiequality.Semantic.DeepEqual(from, c.Resources) {
				continue
			}
			out = append(out, ContainerResize{Name: c.Name, From: *from.DeepCopy(), To: *c.Resources.DeepCopy(), Restart: ResizeNeedsRestart(&c, from)})
		}
	}
	return out
}

// podLevelChange is the change that takes a's pod-level resources to
// pod's spec, nil when none.
func (a podAllocation) podLevelChange(pod *corev1.Pod) *PodLevelResize {
	from, ok := a.of(podLevel)
	if pod.Spec.Resources == nil || !ok || apiequality.Semantic.DeepEqual(from, *pod.Spec.Resources) {
		return nil
	}
	return &PodLevelResize{From: *from.DeepCopy(), To: *pod.Spec.Resources.DeepCopy()}
}

// with is a with the resize req made.
func (a podAllocation) with(req ResizeRequest) podAllocation {
	out := slices.Clone(a)
	for _, ch := range req.Containers {
		out.set(ch.Name, ch.To)
	}
	if req.PodLevel != nil {
		out.set(podLevel, req.PodLevel.To)
	}
	return out
}

// applyTo returns pod with its resources as allocated, the pod the
// provider is given. It shares all but its containers with pod.
func (a podAllocation) applyTo(pod *corev1.Pod) *corev1.Pod {
	out := *pod
	out.Spec.InitContainers = a.applyToContainers(pod.Spec.InitContainers)
	out.Spec.Containers = a.applyToContainers(pod.Spec.Containers)
	if r, ok := a.of(podLevel); ok {
		out.Spec.Resources = r.DeepCopy()
	}
	return &out
}

func (a podAllocation) applyToContainers(list []corev1.Container) []corev1.Container {
	if list == nil {
		return nil
	}
	out := make([]corev1.Container, len(list))
	for i, c := range list {
		out[i] = c
		if r, ok := a.of(c.Name); ok {
			out[i].Resources = *r.DeepCopy()
		}
	}
	return out
}

// ResizeNeedsRestart reports whether resizing c from the resources from to
// those of its spec needs a restart: its resizePolicy is RestartContainer
// for a resource whose request or limit changes (the API server defaults
// the policy to NotRequired). It is ContainerResize.Restart, for providers
// resized through UpdatePod.
func ResizeNeedsRestart(c *corev1.Container, from corev1.ResourceRequirements) bool {
	for _, p := range c.ResizePolicy {
		if p.RestartPolicy != corev1.RestartContainer {
			continue
		}
		if !quantityEqual(from.Requests, c.Resources.Requests, p.ResourceName) || !quantityEqual(from.Limits, c.Resources.Limits, p.ResourceName) {
			return true
		}
	}
	return false
}

func quantityEqual(a, b corev1.ResourceList, name corev1.ResourceName) bool {
	qa, oka := a[name]
	qb, okb := b[name]
	return oka == okb && qa.Cmp(qb) == 0
}

// resizeState is where a pod's latest resize stands.
type resizeState struct {
	// pending is set while the latest resize is deferred or infeasible.
	pending *resizePending
	// inProgress is the generation of an accepted resize the provider is
	// still applying, 0 when none.
	inProgress int64
}

type resizePending struct {
	outcome    ResizeOutcome // ResizeDeferred or ResizeInfeasible
	message    string
	generation int64
}

// after is the state once the provider answered result to the resize of
// the pod's generation.
func (s resizeState) after(result ResizeResult, generation int64) resizeState {
	switch result.Outcome {
	case ResizeDone:
		return resizeState{}
	case ResizeInProgress:
		if s.inProgress != 0 {
			generation = s.inProgress // as the kubelet, keep the first one's
		}
		return resizeState{inProgress: generation}
	}
	return resizeState{pending: &resizePending{outcome: result.Outcome, message: result.Message, generation: generation}, inProgress: s.inProgress}
}

// infeasible reports whether the resize of generation is known infeasible, so
// not to be proposed again.
func (s resizeState) infeasible(generation int64) bool {
	return s.pending != nil && s.pending.outcome == ResizeInfeasible && s.pending.generation == generation
}

// checkResult returns an error for a result without a valid outcome.
func checkResult(r ResizeResult) error {
	if r.Outcome < ResizeDone || r.Outcome > ResizeInfeasible {
		return fmt.Errorf("PodResizer returned an invalid outcome %d", int(r.Outcome))
	}
	return nil
}

// allocate decides the resources the provider is given for pod, and
// returns resolved (the provider's copy of pod) with them. A pod created,
// or one the provider already runs as it is, is given its spec's; one the
// provider runs with other resources is resized: a PodResizer is asked, a
// provider without one is given the new resources by UpdatePod.
func (pc *PodController) allocate(ctx context.Context, action providerAction, pod, resolved *corev1.Pod, rec *podRecord) (*corev1.Pod, error) {
	if action != actionUpdate {
		rec.allocated(pod.UID, allocationOf(pod), pod.Generation)
		return resolved, nil
	}
	alloc, err := pc.resize(ctx, pod, rec)
	if err != nil {
		return nil, err
	}
	return alloc.applyTo(resolved), nil
}

// retryDeferredResize proposes again a resize the provider deferred, for
// a pod whose spec has not changed since.
func (pc *PodController) retryDeferredResize(ctx context.Context, pod *corev1.Pod, rec *podRecord) error {
	if p := rec.view().resizeOf(pod.UID).pending; p == nil || p.outcome != ResizeDeferred {
		return nil
	}
	if _, err := pc.resize(ctx, pod, rec); err != nil {
		return err
	}
	pc.statusQueue.Enqueue(podKey(pod))
	return nil
}

// resize takes the pod's allocation to its spec's resources as far as the
// provider accepts, records the outcome and returns the allocation.
func (pc *PodController) resize(ctx context.Context, pod *corev1.Pod, rec *podRecord) (podAllocation, error) {
	st := rec.view()
	alloc := st.allocationOf(pod.UID)
	if alloc == nil {
		alloc = allocationFromStatus(pod) // the daemon restarted
	}
	req := ResizeRequest{Pod: pod, Containers: alloc.changes(pod), PodLevel: alloc.podLevelChange(pod)}
	switch {
	case len(req.Containers) == 0 && req.PodLevel == nil:
		rec.allocated(pod.UID, alloc, pod.Generation)
		rec.resizeWithdrawn(pod.UID)
		return alloc, nil
	case st.resizeOf(pod.UID).infeasible(pod.Generation):
		rec.allocated(pod.UID, alloc, pod.Generation)
		return alloc, nil
	}
	result := ResizeResult{Outcome: ResizeDone} // UpdatePod applies it
	if resizer := pc.caps.Resizer; resizer != nil {
		err := pc.traceProvider(ctx, "ResizePod", func(ctx context.Context) error {
			var err error
			asked := req
			asked.Pod = pod.DeepCopy() // the provider's to keep
			if result, err = resizer.ResizePod(ctx, asked); err == nil {
				err = checkResult(result)
			}
			return err
		})
		if err != nil {
			pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonProviderResizeFailed, "Provider failed to resize the pod: %v", err)
			return nil, err
		}
	}
	log.G(ctx).WithField("outcome", result.Outcome.String()).Info("pod resize")
	if result.Outcome == ResizeDone || result.Outcome == ResizeInProgress {
		alloc = alloc.with(req)
	}
	rec.resized(pod.UID, alloc, result, pod.Generation)
	if result.Outcome == ResizeDeferred {
		pc.syncQueue.EnqueueAfter(podKey(pod), DeferredResizeRetryInterval)
	}
	return alloc, nil
}

// ReasonProviderResizeFailed is recorded when PodResizer.ResizePod fails;
// the resize is proposed again.
const ReasonProviderResizeFailed = "ProviderResizeFailed"

// withResizeStatus returns status (to be written for pod, built from the
// provider's report when reported is set, else from what Kubernetes shows)
// with what the kubelet reports of a pod's allocation in st: each
// container's allocatedResources and resources, the pod's totals and the
// resize conditions (withObservedGeneration adds the generation). It changes
// nothing: what the status shows of the resize beyond st (a finished pod's
// resize gone, one in progress the provider reports applied) is the
// settlement, for the caller to record once the status is written.
func withResizeStatus(pod *corev1.Pod, st podState, status corev1.PodStatus, current *corev1.PodStatus, reported bool) (corev1.PodStatus, resizeSettlement) {
	settled := resizeSettlement{uid: pod.UID}
	alloc := st.allocationOf(pod.UID)
	if alloc == nil {
		return status, settled // the provider was not given the pod yet
	}
	rs := st.resizeOf(pod.UID)
	if isTerminalPhase(status.Phase) && (rs.pending != nil || rs.inProgress != 0) {
		rs = resizeState{} // as the kubelet, a finished pod has no resize
		settled.ended = true
	}
	s := *status.DeepCopy()
	applied := true
	for _, lists := range [][2][]corev1.ContainerStatus{
		{s.InitContainerStatuses, current.InitContainerStatuses},
		{s.ContainerStatuses, current.ContainerStatuses},
	} {
		for i := range lists[0] {
			cs := &lists[0][i]
			r, ok := alloc.of(cs.Name)
			if !ok {
				continue
			}
			cs.AllocatedResources = r.Requests.DeepCopy()
			switch prev := containerStatus(lists[1], cs.Name); {
			case reported && cs.Resources != nil:
				// The provider's own report of what it applied.
			case rs.inProgress != 0 && prev != nil && prev.Resources != nil:
				cs.Resources = prev.Resources.DeepCopy() // not applied yet
			default:
				cs.Resources = r.DeepCopy()
			}
			applied = applied && resourcesApplied(r, *cs.Resources)
		}
	}
	// The pod's totals, as the kubelet reports them with pod-level
	// resources (InPlacePodLevelResourcesVerticalScaling, on since 1.36).
	allocated := alloc.applyTo(pod)
	effective := corev1.ResourceRequirements{
		Requests: resourcehelper.PodRequests(allocated, resourcehelper.PodResourcesOptions{}),
		Limits:   resourcehelper.PodLimits(allocated, resourcehelper.PodResourcesOptions{}),
	}
	s.AllocatedResources = effective.Requests
	switch {
	case reported && s.Resources != nil:
	case rs.inProgress != 0 && current.Resources != nil:
		s.Resources = current.Resources.DeepCopy()
	default:
		s.Resources = &effective
	}
	if _, ok := alloc.of(podLevel); ok {
		applied = applied && resourcesApplied(effective, *s.Resources)
	}
	if rs.inProgress != 0 && applied {
		settled.applied = rs.inProgress
		rs.inProgress = 0
	}
	s.Conditions = resizeConditions(s.Conditions, current.Conditions, rs, metav1.Now())
	return s, settled
}

// resizeSettlement is what a status built by withResizeStatus shows of a
// pod's resize that its record does not know yet.
type resizeSettlement struct {
	uid types.UID
	// ended: the pod finished, so its resize is no more.
	ended bool
	// applied is the generation of the resize in progress the provider
	// reports applied, 0 if none.
	applied int64
}

// record makes the settlement's transitions in rec.
func (s resizeSettlement) record(rec *podRecord) {
	if s.ended {
		rec.resizeEnded(s.uid)
	}
	if s.applied != 0 {
		rec.resizeApplied(s.uid, s.applied)
	}
}

// resourcesApplied reports whether the resources a container runs with
// match its allocation in the resources a resize changes (CPU, memory).
func resourcesApplied(alloc, running corev1.ResourceRequirements) bool {
	for _, name := range []corev1.ResourceName{corev1.ResourceCPU, corev1.ResourceMemory} {
		if !quantityEqual(alloc.Requests, running.Requests, name) || !quantityEqual(alloc.Limits, running.Limits, name) {
			return false
		}
	}
	return true
}

// resizeConditions are conds with the resize conditions as rs says; a
// condition keeps its transition time from current while its reason stays.
func resizeConditions(conds, current []corev1.PodCondition, rs resizeState, now metav1.Time) []corev1.PodCondition {
	out := make([]corev1.PodCondition, 0, len(conds)+2)
	for _, c := range conds {
		if c.Type != corev1.PodResizePending && c.Type != corev1.PodResizeInProgress {
			out = append(out, c)
		}
	}
	add := func(t corev1.PodConditionType, reason, msg string, gen int64) {
		c := corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, Reason: reason, Message: msg, ObservedGeneration: gen, LastTransitionTime: now}
		for _, old := range current {
			if old.Type == t && old.Reason == reason {
				c.LastTransitionTime = old.LastTransitionTime
			}
		}
		out = append(out, c)
	}
	if p := rs.pending; p != nil {
		add(corev1.PodResizePending, p.outcome.String(), p.message, p.generation)
	}
	if rs.inProgress != 0 {
		add(corev1.PodResizeInProgress, "", "", rs.inProgress)
	}
	return out
}

// allocationOf returns the allocation of the pod of uid, nil when unknown.
func (s podState) allocationOf(uid types.UID) podAllocation {
	if s.allocOf != uid {
		return nil
	}
	return s.alloc
}

// resizeOf returns the resize state of the pod of uid.
func (s podState) resizeOf(uid types.UID) resizeState {
	if s.allocOf != uid {
		return resizeState{}
	}
	return s.resize
}

// generationActedOn is the pod's metadata.generation whose resources were
// last decided for the provider, 0 when none.
func (s podState) generationActedOn(uid types.UID) int64 {
	if s.allocOf != uid {
		return 0
	}
	return s.allocGen
}
