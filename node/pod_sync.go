package node

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/client-go/tools/cache"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/internal/perpod"
	"github.com/vkubelet/virtual-kubelet/node/internal/podenv"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace"
)

// Event reasons the pod controller records.
const (
	// ReasonFailed is the kubelet's reason for a container that cannot be
	// configured, e.g. a missing ConfigMap.
	ReasonFailed = "Failed"
	// ReasonInvalidEnvironmentVariableNames is recorded when envFrom skips keys.
	ReasonInvalidEnvironmentVariableNames = "InvalidEnvironmentVariableNames"
	// ReasonProviderCreateFailed, ReasonProviderUpdateFailed and
	// ReasonProviderDeleteFailed are recorded when the provider call fails.
	ReasonProviderCreateFailed = "ProviderCreateFailed"
	ReasonProviderUpdateFailed = "ProviderUpdateFailed"
	ReasonProviderDeleteFailed = "ProviderDeleteFailed"
	// ReasonProviderRejected is the status reason of a pod the provider
	// refused as invalid; it is Failed and not retried.
	ReasonProviderRejected = "ProviderRejected"
	// ReasonProviderLost is recorded when a running pod disappears from the
	// provider: it is created again, or marked Failed, as its restart policy
	// says. A PodNotifier that finds it lost a pod (deleted behind its
	// back) reports it with this status.reason, for the same decision.
	ReasonProviderLost = "ProviderLost"
	// ReasonCreateContainerConfigError is the waiting reason of containers
	// whose environment cannot be resolved, as the kubelet reports it.
	ReasonCreateContainerConfigError = "CreateContainerConfigError"
	// ReasonProviderDidNotStop is recorded, and set as the pod's and its
	// containers' reason, when the provider has not confirmed a deleted pod
	// stopped by its deletion timestamp plus GracePeriodMargin: the
	// controller writes the terminal status itself and removes the object.
	ReasonProviderDidNotStop = "ProviderDidNotStop"
)

// syncPodFromKubernetes reconciles one pod from Kubernetes into the provider:
// create it, update it when its spec changed, or delete it.
func (pc *PodController) syncPodFromKubernetes(ctx context.Context, key string) error {
	namespace, name, err := cache.SplitMetaNamespaceKey(key)
	if err != nil {
		log.G(ctx).WithError(err).Error("malformed pod key")
		return nil
	}
	pod, err := pc.lister.Pods(namespace).Get(name)
	if apierrors.IsNotFound(err) {
		return pc.podGone(ctx, key)
	}
	if err != nil {
		return err
	}
	ctx = withPodFields(ctx, pod)

	rec := pc.pods.get(key)
	if applied := rec.view().applied; applied != nil && applied.uid != pod.UID {
		// Same name, new pod: the provider still runs the old one.
		if err := pc.callProvider(ctx, "DeletePod", identity(namespace, name, applied.uid), pc.provider.DeletePod); err != nil && !errdefs.IsNotFound(err) {
			return err
		}
		pc.ended(key, perpod.Replaced)
	}

	switch {
	case pod.DeletionTimestamp != nil:
		return pc.deleteFromProvider(ctx, key, pod, rec)
	case isTerminalPhase(pod.Status.Phase):
		// Finished pods are not started again, as with the kubelet.
		return nil
	}
	return pc.createOrUpdate(ctx, pod, rec)
}

// podGone handles a pod whose Kubernetes object no longer exists: force
// deleted, or deleted by us once its terminal status was written.
func (pc *PodController) podGone(ctx context.Context, key string) error {
	rec := pc.pods.lookup(key)
	if rec == nil {
		return nil
	}
	namespace, name, _ := cache.SplitMetaNamespaceKey(key)
	if stop := rec.view().stopOnGone(namespace, name); stop != nil {
		ctx = withPodFields(ctx, stop)
		if err := pc.callProvider(ctx, "DeletePod", stop, pc.provider.DeletePod); err != nil && !errdefs.IsNotFound(err) {
			return err
		}
	}
	pc.forget(key)
	return nil
}

// gaveUp is called when a queue's retry policy gives up on key: a pod that
// no longer exists keeps no record behind.
func (pc *PodController) gaveUp(_ context.Context, key string) {
	if pod, err := pc.cachedPod(key); pod == nil && err == nil {
		pc.forget(key)
	}
}

// deleteFromProvider handles a pod being deleted gracefully. The provider is
// told again when the grace period shrinks (a second `kubectl delete` with a
// shorter one). The object is removed from Kubernetes once the provider's
// terminal status is written (see syncPodStatusFromProvider), at once if the
// provider does not have the pod, and in any case soon after the grace
// period ends: the status queue is asked to look again at that deadline.
func (pc *PodController) deleteFromProvider(ctx context.Context, key string, pod *corev1.Pod, rec *podRecord) error {
	// Whatever the provider does, look again at the deadline (computed once
	// the provider was told, which can move it).
	defer func() { pc.statusQueue.EnqueueAfter(key, time.Until(pc.stopDeadline(pod, rec))) }()
	grace := ptr.Deref(pod.DeletionGracePeriodSeconds, 0)
	if rec.view().tellProvider(grace, isTerminalStatus(&pod.Status)) {
		err := pc.callProvider(ctx, "DeletePod", pod.DeepCopy(), pc.provider.DeletePod)
		switch {
		case errdefs.IsNotFound(err):
			// Nothing to stop; the pod still ends with a terminal status.
			rec.providerDeleted(grace)
			pc.providerLost(ctx, key, pod, rec) // a deleting pod is not created again
			return nil
		case err != nil:
			pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonProviderDeleteFailed, "Provider failed to delete the pod: %v", err)
			return err
		}
		rec.providerDeleted(grace)
	}
	// A pod that had already finished gets no new status from the provider:
	// the status handler sees it is terminal and deletes the object.
	pc.statusQueue.Enqueue(key)
	return nil
}

// createOrUpdate hands the pod, with its environment resolved, to the
// provider when the provider has not got it or its spec changed.
func (pc *PodController) createOrUpdate(ctx context.Context, pod *corev1.Pod, rec *podRecord) error {
	applied := rec.view().applied
	if applied != nil && !applied.changed(pod) {
		return pc.retryDeferredResize(ctx, pod, rec)
	}

	withIPs, err := pc.withPodIPs(ctx, pod)
	if err != nil {
		pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFailedCreatePodSandBox, "Failed to give the pod its IPs: %v", err)
		return err
	}
	resolved, err := pc.resolveEnv(withIPs)
	if err != nil {
		return pc.configError(ctx, pod, rec, err)
	}
	rec.configMissing(false)
	if err := pc.setVolumes(ctx, pod, resolved); err != nil {
		return pc.configError(ctx, pod, rec, err)
	}

	action := actionUpdate
	if applied == nil {
		if action, err = pc.firstSight(ctx, resolved, rec); err != nil {
			return err
		}
	}
	if action == actionLost {
		if !pc.providerLost(ctx, podKey(pod), pod, rec) {
			return nil
		}
		action = actionCreate
	}
	if action == actionCreate {
		if pc.refuse(ctx, pod, rec) {
			return nil
		}
		if handled, err := pc.prepareDevices(ctx, pod, resolved, rec); handled || err != nil {
			return err
		}
	}
	if resolved, err = pc.allocate(ctx, action, pod, resolved, rec); err != nil {
		return err
	}
	switch action {
	case actionCreate:
		defer rec.createStarted()()
		err = pc.callProvider(ctx, "CreatePod", resolved, pc.provider.CreatePod)
	case actionUpdate:
		err = pc.callProvider(ctx, "UpdatePod", resolved, pc.provider.UpdatePod)
	}
	if err != nil {
		reason := action.failureReason()
		if errdefs.IsInvalidInput(err) {
			pc.recorder.Eventf(pod, corev1.EventTypeWarning, reason, "Provider rejected the pod: %v", err)
			pc.reject(pod, rec, err)
			return nil
		}
		pc.recorder.Eventf(pod, corev1.EventTypeWarning, reason, "Provider failed: %v", err)
		return err
	}
	rec.handedOver(pod)
	// The status shows the generation acted on, and the allocation.
	pc.statusQueue.Enqueue(podKey(pod))
	return nil
}

// providerAction is what the provider must be told of a pod the controller
// hands over.
type providerAction int

const (
	// actionNone: the provider already runs the pod as it is.
	actionNone providerAction = iota
	// actionCreate: the provider does not have the pod.
	actionCreate
	// actionUpdate: the provider has an older spec of the pod.
	actionUpdate
	// actionLost: the pod ran before, and the provider no longer has it.
	actionLost
)

// failureReason is the Event reason of a failed call for action.
func (a providerAction) failureReason() string {
	if a == actionCreate {
		return ReasonProviderCreateFailed
	}
	return ReasonProviderUpdateFailed
}

// resolveEnv returns the provider's copy of pod, with its environment
// resolved unless the provider resolves it itself; skipped references and
// keys are reported as Events.
func (pc *PodController) resolveEnv(pod *corev1.Pod) (*corev1.Pod, error) {
	if pc.skipEnv {
		return pod.DeepCopy(), nil
	}
	res, err := pc.env.Resolve(pod)
	if err != nil {
		return nil, err
	}
	pc.recordMissingRefs(pod, true, res.SkippedOptional...)
	if len(res.InvalidKeys) > 0 {
		pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonInvalidEnvironmentVariableNames,
			"Keys [%s] from the EnvFrom configMap or secret were skipped since they are invalid environment variable names.", strings.Join(res.InvalidKeys, ", "))
	}
	return res.Pod, nil
}

// lookUp asks whether the provider has the pod: GetPod, unless this is
// the key's first look-up and the listing of the provider's pods at the
// start shows it did not have it.
func (pc *PodController) lookUp(ctx context.Context, pod *corev1.Pod, rec *podRecord) (*corev1.Pod, error) {
	if pc.listing.LacksAtFirstLookUp(podKey(pod), rec.lookedUp) {
		return nil, errdefs.NotFound("not among the provider's pods")
	}
	var existing *corev1.Pod
	err := pc.traceProvider(ctx, "GetPod", func(ctx context.Context) error {
		var err error
		existing, err = pc.provider.GetPod(ctx, pod.Namespace, pod.Name)
		return err
	})
	return existing, err
}

// firstSight decides what to do with a pod this process has not handed to
// the provider yet: the provider may already run it (we restarted), run an
// older pod of the same name, not have it, or have lost it. A pod whose
// status shows it ran is reported lost (restart policy decides, see
// providerLost), unless that was decided already and it is being created
// again.
func (pc *PodController) firstSight(ctx context.Context, resolved *corev1.Pod, rec *podRecord) (providerAction, error) {
	existing, err := pc.lookUp(ctx, resolved, rec)
	switch {
	case errdefs.IsNotFound(err) || (err == nil && existing == nil):
		if everStarted(&resolved.Status) && !rec.view().recreate {
			return actionLost, nil
		}
		return actionCreate, nil
	case err != nil:
		return actionNone, err
	case existing.UID != "" && existing.UID != resolved.UID:
		if err := pc.callProvider(ctx, "DeletePod", existing, pc.provider.DeletePod); err != nil && !errdefs.IsNotFound(err) {
			return actionNone, err
		}
		return actionCreate, nil
	}
	// The provider runs the pod (this process restarted): its status now,
	// which may have moved on meanwhile, is written as any later one, with
	// the restarts the API server shows that the provider does not count.
	if st := rec.view(); len(st.restarts) == 0 {
		if restarts := uncountedRestarts(&resolved.Status, &existing.Status); restarts != nil {
			rec.restartsCounted(restarts)
		}
	}
	pc.providerSaw(podKey(resolved), nil, existing)
	if apiequality.Semantic.DeepEqual(existing.Spec, resolved.Spec) {
		log.G(ctx).Debug("provider already runs the pod")
		return actionNone, nil
	}
	return actionUpdate, nil
}

// everStarted reports whether a pod's status shows it ran: a status only a
// provider that had the pod can have written.
func everStarted(s *corev1.PodStatus) bool {
	if s.Phase == corev1.PodRunning {
		return true
	}
	for _, list := range [][]corev1.ContainerStatus{s.InitContainerStatuses, s.ContainerStatuses} {
		for _, c := range list {
			if c.State.Running != nil || c.State.Terminated != nil || c.LastTerminationState.Terminated != nil || c.RestartCount > 0 {
				return true
			}
		}
	}
	return false
}

// configError reports a pod whose environment cannot be resolved: Pending,
// its containers waiting with CreateContainerConfigError and an Event, as the
// kubelet does. A missing object is retried (and retried at once when a
// ConfigMap or Secret appears in the namespace); an invalid reference is not.
func (pc *PodController) configError(ctx context.Context, pod *corev1.Pod, rec *podRecord, err error) error {
	var missing *podenv.MissingError
	var invalid *podenv.InvalidError
	isMissing := errors.As(err, &missing)
	if !isMissing && !errors.As(err, &invalid) {
		return err // a lister failure: retry
	}
	rec.configMissing(isMissing)
	pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFailed, "Error: %v", err)
	if isMissing {
		pc.recordMissingRefs(pod, false, *missing)
	}
	log.G(ctx).WithError(err).Warn("cannot configure the pod's containers")

	status := pod.Status.DeepCopy()
	status.Phase = corev1.PodPending
	status.ContainerStatuses = waitingStatuses(pod.Spec.Containers, ReasonCreateContainerConfigError, err.Error())
	pc.queueStatus(pod, *status)
	if isMissing {
		return err
	}
	return nil
}

// queueStatus hands a status the controller decided itself (a config error,
// a rejection, a lost pod) to the status queue, which writes it as it writes
// the provider's: one writer per pod.
func (pc *PodController) queueStatus(pod *corev1.Pod, status corev1.PodStatus) {
	key := podKey(pod)
	pc.pods.get(key).providerReported(withStatus(pod, status))
	pc.statusQueue.Enqueue(key)
}

func waitingStatuses(containers []corev1.Container, reason, msg string) []corev1.ContainerStatus {
	out := make([]corev1.ContainerStatus, len(containers))
	for i, c := range containers {
		out[i] = corev1.ContainerStatus{
			Name:  c.Name,
			Image: c.Image,
			State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason, Message: msg}},
		}
	}
	return out
}

// reject marks a pod the provider refused as invalid Failed; retrying an
// invalid pod cannot succeed.
func (pc *PodController) reject(pod *corev1.Pod, rec *podRecord, cause error) {
	status := rec.freshestStatus(pod).DeepCopy()
	status.Phase = corev1.PodFailed
	status.Reason = ReasonProviderRejected
	status.Message = fmt.Sprintf("The provider rejected the pod: %v", cause)
	pc.queueStatus(pod, *status)
}

// callProvider runs one provider call on a pod in a span of its own.
func (pc *PodController) callProvider(ctx context.Context, op string, pod *corev1.Pod, call func(context.Context, *corev1.Pod) error) error {
	return pc.traceProvider(ctx, op, func(ctx context.Context) error { return call(ctx, pod) })
}

func (pc *PodController) traceProvider(ctx context.Context, op string, call func(context.Context) error) error {
	ctx, span := trace.StartSpan(ctx, "provider."+op)
	defer span.End()
	start := time.Now()
	err := call(ctx)
	if pc.observe != nil {
		pc.observe(op, time.Since(start), err)
	}
	if err != nil {
		span.SetStatus(err)
		if !errdefs.IsNotFound(err) {
			log.G(ctx).WithError(err).Warnf("provider %s failed", op)
		}
	}
	return err
}

func withPodFields(ctx context.Context, pod *corev1.Pod) context.Context {
	return log.WithFields(ctx, map[string]any{"namespace": pod.Namespace, "pod": pod.Name, "uid": string(pod.UID)})
}

// needsSync reports whether an informer update concerns the provider: the
// pod itself changed, not just its status (which we write).
func needsSync(old, cur *corev1.Pod) bool {
	prev := appliedOf(old)
	if old.UID != cur.UID || prev.changed(cur) {
		return true
	}
	if (old.DeletionTimestamp == nil) != (cur.DeletionTimestamp == nil) {
		return true
	}
	og, cg := old.DeletionGracePeriodSeconds, cur.DeletionGracePeriodSeconds
	return (og == nil) != (cg == nil) || (og != nil && *og != *cg)
}

func isTerminalPhase(p corev1.PodPhase) bool {
	return p == corev1.PodSucceeded || p == corev1.PodFailed
}
