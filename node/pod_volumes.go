package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node/internal/podvolumes"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/queue"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// SyncPodVolumesQueue is the name of the queue that keeps the volume
// contents of running pods current (ConfigMap and Secret changes, token
// renewals).
const SyncPodVolumesQueue = "syncPodVolumes"

// PodVolumeHandler is an optional extension of PodLifecycleHandler: a
// provider that implements it (and, a CapabilityDeclarer, declares
// CapabilityVolumes) gets the files of its pods' configMap, secret,
// downwardAPI and projected volumes (service-account tokens included)
// resolved by the controller, as a kubelet writes them (see package
// node/volume). Other volume kinds (emptyDir, persistentVolumeClaim,
// hostPath, image, csi, ...) stay in the pod's spec for the provider.
//
// The controller calls SetPodVolumes before it calls CreatePod or UpdatePod
// with a pod, so the files are there when the containers start, and again
// whenever they change while the provider runs the pod: a ConfigMap or Secret
// the volumes read was created, changed or deleted (delivered as soon as the
// informer sees it), a token is due for renewal (at 80% of its lifetime or
// after PodControllerConfig.ServiceAccountTokenMaxAge), or the pod's labels or
// annotations changed under a downward API volume. It is not called again
// with unchanged contents. As on a kubelet, a volume whose mandatory
// ConfigMap or Secret disappears keeps its last contents, and volumeMounts
// with a subPath keep the contents they started with.
//
// A pod whose volumes cannot be resolved (a missing mandatory ConfigMap,
// Secret or key) is not handed to the provider: it stays Pending, its
// containers waiting with CreateContainerConfigError, with an Event, until
// the object appears.
//
// The pod passed identifies the pod (namespace, name, UID); the provider
// keeps the contents until DeletePod and must not modify them. An error is
// retried.
type PodVolumeHandler interface {
	SetPodVolumes(ctx context.Context, pod *corev1.Pod, contents *volume.Contents) error
}

// TokenOnReadHandler is a PodVolumeHandler that reads its pods'
// service-account tokens rarely if ever, as a simulator does. When
// ReadsTokensOnRead says so, the controller requests no token to start a
// pod: each token file comes with volume.File.Token set and no Data, and
// File.Read requests the token when the provider reads it (and again once
// it is due for renewal), so a pod costs a TokenRequest only if its token
// is read. A provider that writes the files for real containers to read
// wants the tokens at once, and should not implement this.
type TokenOnReadHandler interface {
	PodVolumeHandler
	ReadsTokensOnRead() bool
}

// newPodVolumes returns the manager of the pods' volumes and the queue
// that keeps them current; nil, nil when the provider has no volumes
// capability, which then costs nothing: no resolution, no TokenRequest.
func newPodVolumes(pc *PodController, cfg PodControllerConfig) (*podvolumes.Manager, *queue.Queue) {
	h := pc.caps.Volumes
	if h == nil {
		return nil, nil
	}
	var r volume.Resolver
	r.Node = cfg.Node
	// The env's listers: the same caches, their misses confirmed alike.
	r.ConfigMaps, r.Secrets = pc.env.ConfigMaps, pc.env.Secrets
	if cfg.ServiceAccountClient != nil {
		r.Tokens = volume.NewTokens(cfg.ServiceAccountClient, cfg.ServiceAccountTokenMaxAge)
	}
	r.TokensOnRead = pc.caps.TokensOnRead
	q := queue.New(SyncPodVolumesQueue, nil, retryUntilPermanent, pc.syncPodVolumes, queueOptions(cfg)...)
	m := podvolumes.New(podvolumes.Config{
		Resolver: r,
		Set: func(ctx context.Context, pod *corev1.Pod, contents *volume.Contents) error {
			return pc.traceProvider(ctx, "SetPodVolumes", func(ctx context.Context) error {
				return h.SetPodVolumes(ctx, pod, contents)
			})
		},
		RefreshAt: func(key string, at time.Time) { q.EnqueueAfter(key, time.Until(at)) },
	})
	return m, q
}

// setVolumes resolves the volumes of pod and hands them to the provider
// (with forProvider, the pod as the provider gets it) if they changed.
func (pc *PodController) setVolumes(ctx context.Context, pod, forProvider *corev1.Pod) error {
	if pc.volumes == nil {
		return nil
	}
	return pc.volumes.Set(ctx, podKey(pod), pod, forProvider)
}

// syncPodVolumes brings the volume contents of a pod the provider runs up
// to date. A pod gone is left to the sync queue, which ends it.
func (pc *PodController) syncPodVolumes(ctx context.Context, key string) error {
	pod, err := pc.cachedPod(key)
	if pod == nil || err != nil {
		return err
	}
	if pod.DeletionTimestamp != nil || isTerminalPhase(pod.Status.Phase) {
		return nil
	}
	ctx = withPodFields(ctx, pod)
	err = pc.volumes.Refresh(ctx, key, pod)
	if podvolumes.IsConfigError(err) {
		// The kubelet keeps a volume's last contents when its mandatory
		// object goes away; the object's return queues the pod again.
		log.G(ctx).WithError(err).Warn("volume contents not updated")
		return nil
	}
	return err
}

// volumeSourceChanged queues the pods whose volumes read a ConfigMap or
// Secret that was created, changed or deleted.
func (pc *PodController) volumeSourceChanged(obj any) {
	if pc.volumes == nil {
		return
	}
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	var source, namespace string
	switch o := obj.(type) {
	case *corev1.ConfigMap:
		source, namespace = "ConfigMap/"+o.Name, o.Namespace
	case *corev1.Secret:
		source, namespace = "Secret/"+o.Name, o.Namespace
	default:
		return
	}
	for _, key := range pc.volumes.Readers(namespace, source) {
		pc.volumeQueue.Enqueue(key)
	}
}
