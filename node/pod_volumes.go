package node

import (
	"context"
	"crypto/sha256"
	"errors"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

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

// podVolumes is the controller's volume state; nil when the provider has
// no volumes capability, which then costs nothing: no resolution, no
// TokenRequest.
type podVolumes struct {
	handler  PodVolumeHandler
	resolver volume.Resolver
	queue    *queue.Queue
	// locks serialise resolving and delivering per pod (striped by key),
	// so the sync and volume queues cannot hand over older contents after
	// newer ones.
	locks [64]sync.Mutex

	mu sync.Mutex
	// delivered is what the provider was last given, per pod key.
	delivered map[string]deliveredVolumes
}

// deliveredVolumes is what the controller keeps of the contents it handed
// over: a digest, not the files.
type deliveredVolumes struct {
	uid     types.UID
	sum     [sha256.Size]byte
	sources []string
}

func newPodVolumes(pc *PodController, cfg PodControllerConfig) *podVolumes {
	h := pc.caps.Volumes
	if h == nil {
		return nil
	}
	v := &podVolumes{handler: h, delivered: map[string]deliveredVolumes{}}
	v.resolver.Node = cfg.Node
	if cfg.ConfigMapInformer != nil {
		v.resolver.ConfigMaps = cfg.ConfigMapInformer.Lister()
	}
	if cfg.SecretInformer != nil {
		v.resolver.Secrets = cfg.SecretInformer.Lister()
	}
	if cfg.ServiceAccountClient != nil {
		v.resolver.Tokens = volume.NewTokens(cfg.ServiceAccountClient, cfg.ServiceAccountTokenMaxAge)
	}
	v.resolver.TokensOnRead = pc.caps.TokensOnRead
	v.queue = queue.New(SyncPodVolumesQueue, nil, retryUntilPermanent, pc.syncPodVolumes, queueOptions(cfg)...)
	return v
}

// setVolumes resolves the volumes of pod and hands them to the provider
// (with forProvider, the pod as the provider gets it) if they changed.
func (pc *PodController) setVolumes(ctx context.Context, pod, forProvider *corev1.Pod) error {
	v := pc.volumes
	if v == nil {
		return nil
	}
	key := podKey(pod)
	lock := &v.locks[fnv32(key)%uint32(len(v.locks))]
	lock.Lock()
	defer lock.Unlock()
	contents, err := v.resolver.Resolve(ctx, pod)
	if err != nil {
		return err
	}
	sum := contents.Sum()
	v.mu.Lock()
	prev, had := v.delivered[key]
	v.mu.Unlock()
	if !had || prev.uid != pod.UID || prev.sum != sum {
		err := pc.traceProvider(ctx, "SetPodVolumes", func(ctx context.Context) error {
			return v.handler.SetPodVolumes(ctx, forProvider, contents)
		})
		if err != nil {
			return err
		}
	}
	v.mu.Lock()
	v.delivered[key] = deliveredVolumes{uid: pod.UID, sum: sum, sources: contents.Sources}
	v.mu.Unlock()
	if had && prev.uid != pod.UID && v.resolver.Tokens != nil {
		v.resolver.Tokens.Forget(prev.uid)
	}
	if !contents.RefreshAt.IsZero() {
		v.queue.EnqueueAfter(key, time.Until(contents.RefreshAt))
	}
	return nil
}

// syncPodVolumes brings the volume contents of a pod the provider runs up
// to date.
func (pc *PodController) syncPodVolumes(ctx context.Context, key string) error {
	pod, err := pc.cachedPod(key)
	if err != nil {
		return err
	}
	if pod == nil {
		pc.forgetVolumes(key)
		return nil
	}
	if pod.DeletionTimestamp != nil || isTerminalPhase(pod.Status.Phase) {
		return nil
	}
	v := pc.volumes
	v.mu.Lock()
	prev, had := v.delivered[key]
	v.mu.Unlock()
	if !had || prev.uid != pod.UID {
		return nil // never delivered: createOrUpdate delivers the volumes first
	}
	ctx = withPodFields(ctx, pod)
	err = pc.setVolumes(ctx, pod, pod)
	if isConfigError(err) {
		// The kubelet keeps a volume's last contents when its mandatory
		// object goes away; the object's return queues the pod again.
		log.G(ctx).WithError(err).Warn("volume contents not updated")
		return nil
	}
	return err
}

// forgetVolumes drops what the controller keeps of a pod's volumes, once
// the pod is gone.
func (pc *PodController) forgetVolumes(key string) {
	v := pc.volumes
	if v == nil {
		return
	}
	v.mu.Lock()
	prev, had := v.delivered[key]
	delete(v.delivered, key)
	v.mu.Unlock()
	if had && v.resolver.Tokens != nil {
		v.resolver.Tokens.Forget(prev.uid)
	}
	v.queue.Forget(key)
}

// volumeSourceChanged queues the pods whose volumes read a ConfigMap or
// Secret that was created, changed or deleted.
func (pc *PodController) volumeSourceChanged(obj any) {
	v := pc.volumes
	if v == nil {
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
	prefix := namespace + "/"
	var keys []string
	v.mu.Lock()
	for key, d := range v.delivered {
		if strings.HasPrefix(key, prefix) && slices.Contains(d.sources, source) {
			keys = append(keys, key)
		}
	}
	v.mu.Unlock()
	for _, key := range keys {
		v.queue.Enqueue(key)
	}
}

// isConfigError reports whether err says a volume cannot be resolved from
// what exists in the cluster, rather than that reading it failed.
func isConfigError(err error) bool {
	var missing *volume.MissingError
	var invalid *volume.InvalidError
	return errors.As(err, &missing) || errors.As(err, &invalid)
}

func fnv32(s string) uint32 {
	h := fnv.New32a()
	_, _ = h.Write([]byte(s))
	return h.Sum32()
}
