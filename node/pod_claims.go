package node

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	resourcev1informers "k8s.io/client-go/informers/resource/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	resourcev1listers "k8s.io/client-go/listers/resource/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/component-helpers/scheduling/corev1/nodeaffinity"
	"k8s.io/dynamic-resource-allocation/resourceclaim"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// ReasonFailedPrepareDevices is the kubelet's Event reason for a pod
// whose ResourceClaims are not ready for it (not created yet, not
// allocated on the node, not reserved for the pod), which waits; and the
// status reason of a pod failed because the provider cannot prepare one of
// its devices (see DeviceProvider).
const ReasonFailedPrepareDevices = "FailedPrepareDynamicResources"

// podClaims is the controller's view of ResourceClaims, for a provider
// with devices; nil otherwise, which then costs nothing.
type podClaims struct {
	provider DeviceProvider
	lister   resourcev1listers.ResourceClaimLister
	informer cache.SharedIndexInformer
	live     resourcev1client.ResourceClaimsGetter // nil: the cache's answer stands
}

func newPodClaims(caps Capabilities, inf resourcev1informers.ResourceClaimInformer, live resourcev1client.ResourceClaimsGetter) *podClaims {
	if caps.Devices == nil {
		return nil
	}
	return &podClaims{provider: caps.Devices, lister: inf.Lister(), informer: inf.Informer(), live: live}
}

// prepareDevices hands the provider the devices of a pod about to be
// created, once each of its claims is allocated on the node and reserved
// for it; until then it returns an error, so the pod is tried again (and
// at once when one of its claims changes). handled says the pod was failed
// instead: the provider cannot prepare its devices.
func (pc *PodController) prepareDevices(ctx context.Context, pod, forProvider *corev1.Pod, rec *podRecord) (handled bool, err error) {
	if pc.claims == nil || len(pod.Spec.ResourceClaims) == 0 {
		return false, nil
	}
	var node *corev1.Node
	if pc.env.Node != nil {
		node = pc.env.Node()
	}
	claims, err := pc.claims.readyFor(ctx, pod, node)
	if err != nil {
		// The kubelet's words, so the Events read the same.
		pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFailedPrepareDevices, "Failed to prepare dynamic resources: prepare dynamic resources: %v", err)
		return false, fmt.Errorf("waiting for the pod's resource claims: %w", err)
	}
	devices := podDevicesOf(pod, claims)
	err = pc.traceProvider(ctx, "PrepareDevices", func(ctx context.Context) error {
		return pc.claims.provider.PrepareDevices(ctx, forProvider, devices)
	})
	switch {
	case errdefs.IsInvalidInput(err):
		pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFailedPrepareDevices, "The provider cannot prepare the pod's devices: %v", err)
		status := rec.freshestStatus(pod).DeepCopy()
		status.Phase = corev1.PodFailed
		status.Reason = ReasonFailedPrepareDevices
		status.Message = fmt.Sprintf("The provider cannot prepare the pod's devices: %v", err)
		pc.queueStatus(pod, *status)
		return true, nil
	case err != nil:
		pc.recorder.Eventf(pod, corev1.EventTypeWarning, ReasonFailedPrepareDevices, "Failed to prepare dynamic resources: %v", err)
		return false, err
	}
	log.G(ctx).WithField("devices", len(devices.Devices)).Debug("devices prepared")
	return false, nil
}

// readyFor returns the pod's claims by the pod's name for them, as the
// kubelet checks them before it prepares them: each created for the pod
// (a template's), reserved for it and allocated, on node when it is known.
// A claim the pod does not need (no name in its status) is left out. The
// cache can lag: a claim it does not have ready yet is read from the API
// server, where the kubelet reads it, when there is a client.
func (c *podClaims) readyFor(ctx context.Context, pod *corev1.Pod, node *corev1.Node) (map[string]*resourcev1.ResourceClaim, error) {
	out := map[string]*resourcev1.ResourceClaim{}
	for i := range pod.Spec.ResourceClaims {
		podClaim := &pod.Spec.ResourceClaims[i]
		name, mustCheckOwner, err := resourceclaim.Name(pod, podClaim)
		if err != nil {
			return nil, err
		}
		if name == nil {
			continue
		}
		claim, err := c.lister.ResourceClaims(pod.Namespace).Get(*name)
		if err != nil {
			err = fmt.Errorf("fetch ResourceClaim %s: %w", *name, err)
		} else {
			err = claimReady(pod, node, claim, mustCheckOwner)
		}
		if err != nil && c.live != nil {
			ctx, cancel := context.WithTimeout(ctx, confirmTimeout)
			live, liveErr := c.live.ResourceClaims(pod.Namespace).Get(ctx, *name, metav1.GetOptions{})
			cancel()
			if liveErr == nil {
				claim, err = live, claimReady(pod, node, live, mustCheckOwner)
			} else if !apierrors.IsNotFound(liveErr) {
				// As confirmedIn does for ConfigMaps and Secrets: a role
				// without get on resourceclaims shows here.
				log.G(ctx).WithError(liveErr).WithField("claim", *name).Debug("cannot read a claim the cache lacks or has stale; taking the cache's answer")
			}
		}
		if err != nil {
			return nil, err
		}
		out[podClaim.Name] = claim
	}
	return out, nil
}

// claimReady says why the pod cannot use claim yet, if it cannot.
func claimReady(pod *corev1.Pod, node *corev1.Node, claim *resourcev1.ResourceClaim, mustCheckOwner bool) error {
	if mustCheckOwner {
		if err := resourceclaim.IsForPod(pod, claim, false); err != nil {
			return err
		}
	}
	if !resourceclaim.IsReservedForPod(pod, claim, false) {
		return fmt.Errorf("pod %s (%s) is not allowed to use ResourceClaim %s (%s)", pod.Name, pod.UID, claim.Name, claim.UID)
	}
	if claim.Status.Allocation == nil {
		return fmt.Errorf("ResourceClaim %s is not allocated", claim.Name)
	}
	if sel := claim.Status.Allocation.NodeSelector; sel != nil && node != nil {
		if ok, err := nodeaffinity.NewLazyErrorNodeSelector(sel).Match(node); err != nil || !ok {
			return fmt.Errorf("ResourceClaim %s is allocated on other nodes than %s", claim.Name, node.Name)
		}
	}
	return nil
}

// addClaimHandler has a change of a claim look again at the pods it is
// for (reserved for, or made for from a template) that wait to be
// created.
func (pc *PodController) addClaimHandler(regs map[cache.SharedIndexInformer]cache.ResourceEventHandlerRegistration) error {
	if pc.claims == nil {
		return nil
	}
	changed := func(obj any) {
		claim, ok := obj.(*resourcev1.ResourceClaim)
		if !ok {
			return
		}
		var names []string
		for _, r := range claim.Status.ReservedFor {
			if r.APIGroup == "" && r.Resource == "pods" {
				names = append(names, r.Name)
			}
		}
		for _, o := range claim.OwnerReferences {
			if o.APIVersion == "v1" && o.Kind == "Pod" {
				names = append(names, o.Name)
			}
		}
		for _, name := range names {
			key := claim.Namespace + "/" + name
			if rec := pc.pods.lookup(key); rec != nil && rec.view().applied != nil {
				continue // the provider has it: its claims are settled
			}
			if pod, _ := pc.cachedPod(key); pod != nil {
				pc.syncQueue.Enqueue(key)
			}
		}
	}
	reg, err := pc.claims.informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    changed,
		UpdateFunc: func(_, obj any) { changed(obj) },
	})
	if err != nil {
		return err
	}
	regs[pc.claims.informer] = reg
	return nil
}
