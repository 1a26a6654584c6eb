package node

import (
	"context"
	"errors"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	corev1informers "k8s.io/client-go/informers/core/v1"
	resourcev1informers "k8s.io/client-go/informers/resource/v1"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	resourcev1client "k8s.io/client-go/kubernetes/typed/resource/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	"k8s.io/client-go/util/workqueue"

	"github.com/vkubelet/virtual-kubelet/node/internal/perpod"
	"github.com/vkubelet/virtual-kubelet/node/internal/podenv"
	"github.com/vkubelet/virtual-kubelet/node/internal/podips"
	"github.com/vkubelet/virtual-kubelet/node/internal/podlisting"
	"github.com/vkubelet/virtual-kubelet/node/internal/podvolumes"
	"github.com/vkubelet/virtual-kubelet/node/internal/prober"
	"github.com/vkubelet/virtual-kubelet/node/internal/runonce"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/queue"
)

// Defaults of PodControllerConfig.
const (
	// DefaultStatusPollInterval is how often a provider that does not
	// implement PodNotifier is asked for the status of each pod.
	DefaultStatusPollInterval = 5 * time.Second
	// DefaultProviderResyncInterval is how often the provider's pods are
	// compared with Kubernetes' to remove orphans and detect lost pods.
	DefaultProviderResyncInterval = time.Minute
	// DefaultGracePeriodMargin is how long past a deleted pod's grace
	// period the controller waits for the provider to confirm the pod
	// stopped before it writes the terminal status itself.
	DefaultGracePeriodMargin = 5 * time.Second
)

// resyncJitter is the fraction of ProviderResyncInterval by which each
// resync after the first comes earlier or later, at random.
const resyncJitter = 0.25

// Names of the pod controller's work queues, as they appear in metrics and
// spans.
const (
	SyncPodsFromKubernetesQueue    = "syncPodsFromKubernetes"
	DeletePodsFromKubernetesQueue  = "deletePodsFromKubernetes"
	SyncPodStatusFromProviderQueue = "syncPodStatusFromProvider"
)

// PodControllerConfig is used to configure a new PodController.
type PodControllerConfig struct {
	// PodClient is used to perform actions on the k8s API, such as updating
	// pod status. This field is required.
	PodClient corev1client.PodsGetter

	// PodInformer is the informer of the pods bound to this node (usually
	// from an informer factory filtered on spec.nodeName). It is required;
	// the caller starts it.
	PodInformer corev1informers.PodInformer
	// PodLister reads pods; it defaults to PodInformer's lister.
	PodLister corev1listers.PodLister

	// ConfigMapInformer, SecretInformer and ServiceInformer let the
	// controller resolve env and envFrom references and service links. Each
	// is optional: without one, references to that kind cannot be resolved
	// (mandatory ones keep the pod Pending) and service links are not set.
	// The caller starts them.
	ConfigMapInformer corev1informers.ConfigMapInformer
	SecretInformer    corev1informers.SecretInformer
	ServiceInformer   corev1informers.ServiceInformer
	// ObjectClient, if set, confirms with the API server each ConfigMap or
	// Secret a pod refers to that the informers' caches lack, as a kubelet
	// reading them from the API server would see an object created just
	// before the pod. Without it, or when that read fails, the caches'
	// answer stands. nodeutil sets it.
	ObjectClient ObjectClient

	// Node, if set, returns the node the pods run on, for what a kubelet
	// resolves from its node: a downward API reference to a limit a
	// container does not set (resourceFieldRef limits.cpu, limits.memory,
	// ...) is the node's allocatable, and status.hostIP(s) of a pod the
	// provider has not reported yet are the node's addresses. Without it,
	// those resolve to 0 and "". NodeController.Node fits.
	Node func() *corev1.Node

	// PodCIDRs, if set, returns the node's spec.podCIDRs as the API server
	// has them (set by the controller-manager's node IPAM, or by whoever
	// registers nodes). While they are set, pods get IPs from them before
	// CreatePod (see PodIPAssigner), freed when a pod ends or is gone; the
	// IPs of the node's pods in the API server are kept across restarts.
	// An empty answer is asked again at most every PodCIDRRetryInterval.
	// nodeutil sets it to a read of the Node.
	PodCIDRs func(context.Context) ([]string, error)

	// ResourceClaimInformer is the informer of ResourceClaims (all
	// namespaces), required for a provider with devices (DeviceProvider):
	// a pod's claims are checked in it before the pod is created. The
	// caller starts it.
	ResourceClaimInformer resourcev1informers.ResourceClaimInformer
	// ClaimClient, if set, reads from the API server a claim of a pod that
	// the informer's cache does not have ready for it (missing, not
	// reserved for the pod, not allocated), as the kubelet reads claims:
	// the cache can lag the scheduler's writes. Without it, or when the
	// read fails, the cache's answer stands. nodeutil sets it.
	ClaimClient resourcev1client.ResourceClaimsGetter

	// ServiceAccountClient requests the service-account tokens of projected
	// volumes (TokenRequest) for a provider with the volumes capability
	// (PodVolumeHandler); without it such volumes cannot be resolved.
	ServiceAccountClient corev1client.ServiceAccountsGetter
	// ServiceAccountTokenMaxAge is the age at which a token is renewed even
	// if it is valid longer (default volume.DefaultTokenMaxAge, 24h, as on
	// a kubelet); tokens are renewed at 80% of their lifetime otherwise.
	ServiceAccountTokenMaxAge time.Duration

	// EventRecorder records events on pods (missing ConfigMaps, provider
	// errors). This field is required.
	EventRecorder record.EventRecorder

	// Provider runs the pods. It is required unless Capabilities is set.
	Provider PodLifecycleHandler
	// Capabilities, if set, is what the controller uses of the provider,
	// in place of CapabilitiesOf(Provider): the caller resolved them once
	// to share with the other parts of the node (and may have Guarded
	// them). Provider is then not used.
	Capabilities *Capabilities

	// SyncPodsFromKubernetesRateLimiter defines the rate limit for the SyncPodsFromKubernetes queue
	SyncPodsFromKubernetesRateLimiter workqueue.TypedRateLimiter[any]
	// SyncPodsFromKubernetesShouldRetryFunc allows for a custom retry
	// policy for the SyncPodsFromKubernetes queue. The default retries
	// until the pod is handed to the provider, gone, or rejected as invalid
	// input, however long the provider is failing; the rate limiter paces
	// the tries (the default backs off to 30s between them).
	SyncPodsFromKubernetesShouldRetryFunc ShouldRetryFunc

	// DeletePodsFromKubernetesRateLimiter defines the rate limit for the DeletePodsFromKubernetes queue
	DeletePodsFromKubernetesRateLimiter workqueue.TypedRateLimiter[any]
	// DeletePodsFromKubernetesShouldRetryFunc allows for a custom retry
	// policy for the DeletePodsFromKubernetes queue. The default retries
	// until the API server has the deletion, however long it is away.
	DeletePodsFromKubernetesShouldRetryFunc ShouldRetryFunc

	// SyncPodStatusFromProviderRateLimiter defines the rate limit for the SyncPodStatusFromProvider queue
	SyncPodStatusFromProviderRateLimiter workqueue.TypedRateLimiter[any]
	// SyncPodStatusFromProviderShouldRetryFunc allows for a custom retry
	// policy for the SyncPodStatusFromProvider queue. The default retries
	// until the API server has the status, however long it is away, so a
	// terminal status is never lost.
	SyncPodStatusFromProviderShouldRetryFunc ShouldRetryFunc

	// Add custom filtering for pod informer event handlers
	// Use this for cases where the pod informer handles more than pods assigned to this node
	//
	// For example, if the pod informer is not filtering based on pod.Spec.NodeName, you should
	// set that filter here so the pod controller does not handle events for pods assigned to other nodes.
	PodEventFilterFunc PodEventFilterFunc

	// StatusPollInterval is how often a provider that does not implement
	// PodNotifier is polled for pod status (default DefaultStatusPollInterval).
	StatusPollInterval time.Duration

	// ProviderResyncInterval is how often GetPods is compared with the pods
	// in Kubernetes (default DefaultProviderResyncInterval, each wait moved
	// at random by up to a quarter of it either way): pods only the
	// provider has are deleted from it, and running pods the provider lost
	// are created again or marked Failed, as their restart policy says.
	ProviderResyncInterval time.Duration

	// SkipDownwardAPIResolution hands pods to the provider with their
	// environment as written: env and envFrom references to ConfigMaps,
	// Secrets and the downward API unresolved, for providers that resolve
	// them themselves.
	SkipDownwardAPIResolution bool

	// KeepEnvObjectRefs hands pods to the provider with their env and
	// envFrom references to ConfigMaps and Secrets as written and the rest
	// of their environment resolved (downward API, service links), for a
	// provider that copies those objects to where it runs the pod and lets
	// the runtime there read them, so no Secret value is written into the
	// pod it creates. $(VAR) references and the pod's IPs (status.podIP,
	// status.podIPs) are left to that runtime too. A
	// missing mandatory ConfigMap or Secret holds the pod back as usual.
	// SkipDownwardAPIResolution, when also set, wins. A provider whose
	// Capabilities say CopiesEnvObjects gets this without it.
	KeepEnvObjectRefs bool

	// GracePeriodMargin is how long after a deleted pod's deletion
	// timestamp (the end of its grace period) the controller waits for the
	// provider to report it stopped (default DefaultGracePeriodMargin).
	// Then it writes a terminal status itself (containers terminated with
	// reason ProviderDidNotStop), records an Event and removes the object,
	// so no pod stays Terminating because its provider never answered.
	GracePeriodMargin time.Duration

	// ProviderCallObserver, if set, is told the method, duration and error
	// of every provider call, for metrics. It must not block.
	ProviderCallObserver func(method string, took time.Duration, err error)

	// QueueMetrics, if set, receives the work queues' metrics (client-go's
	// work queue metrics: depth, adds, queue and work durations, unfinished
	// work, retries), labelled by queue name, without the goroutine
	// client-go keeps per queue for them. If nil, the queues report through
	// client-go's global provider (workqueue.SetProvider), retries excepted.
	QueueMetrics workqueue.MetricsProvider
}

// PodController is the controller implementation for Pod resources.
type PodController struct {
	// caps is what the provider can do; provider is caps.Pods.
	caps        Capabilities
	provider    PodLifecycleHandler
	writer      podWriter
	informer    corev1informers.PodInformer
	lister      corev1listers.PodLister
	recorder    record.EventRecorder
	env         podenv.Lookup
	volumes     *podvolumes.Manager
	claims      *podClaims
	filter      PodEventFilterFunc
	syncedFuncs []cache.InformerSynced
	configInfs  []cache.SharedIndexInformer

	pollInterval   time.Duration
	resyncInterval time.Duration
	graceMargin    time.Duration
	skipEnv        bool
	ips            *podips.Manager
	prober         *prober.Manager
	observe        func(method string, took time.Duration, err error)

	syncQueue   *queue.Queue
	deleteQueue *queue.Queue
	statusQueue *queue.Queue
	// volumeQueue keeps the volumes of running pods current; nil without
	// volumes.
	volumeQueue *queue.Queue

	pods *podRecords
	// listing is the provider's pods at the start, to spare a GetPod on
	// the first sight of a new pod.
	listing podlisting.Start
	// stores are the per-pod state of the records and the managers, told
	// together when a pod ends (see podstores.go).
	stores perpod.Stores

	ready chan struct{}
	run   *runonce.Once
}

// Validate reports what NewPodController would refuse in cfg, without
// building anything: for a caller that builds the controller later.
func (cfg PodControllerConfig) Validate() error {
	_, err := cfg.validate()
	return err
}

// validate is Validate, with the capabilities the controller would use.
func (cfg PodControllerConfig) validate() (*Capabilities, error) {
	switch {
	case cfg.PodClient == nil:
		return nil, errors.New("pod controller: PodClient is required")
	case cfg.PodInformer == nil:
		return nil, errors.New("pod controller: PodInformer is required")
	case cfg.EventRecorder == nil:
		return nil, errors.New("pod controller: EventRecorder is required")
	case cfg.Provider == nil && cfg.Capabilities == nil:
		return nil, errors.New("pod controller: Provider (or Capabilities) is required")
	case cfg.Capabilities != nil && cfg.Capabilities.Pods == nil:
		return nil, errors.New("pod controller: Capabilities.Pods is required")
	case cfg.StatusPollInterval < 0:
		return nil, fmt.Errorf("pod controller: StatusPollInterval must not be negative, got %s", cfg.StatusPollInterval)
	case cfg.ProviderResyncInterval < 0:
		return nil, fmt.Errorf("pod controller: ProviderResyncInterval must not be negative, got %s", cfg.ProviderResyncInterval)
	case cfg.GracePeriodMargin < 0:
		return nil, fmt.Errorf("pod controller: GracePeriodMargin must not be negative, got %s", cfg.GracePeriodMargin)
	}
	caps := cfg.Capabilities
	if caps == nil {
		c := CapabilitiesOf(cfg.Provider)
		caps = &c
	}
	if caps.Devices != nil && cfg.ResourceClaimInformer == nil {
		return nil, errors.New("pod controller: ResourceClaimInformer is required for a provider with devices (DeviceProvider)")
	}
	return caps, nil
}

// NewPodController creates a new pod controller with the provided config.
func NewPodController(cfg PodControllerConfig) (*PodController, error) {
	caps, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	pc := &PodController{
		caps:           *caps,
		provider:       caps.Pods,
		writer:         newPodWriter(cfg.PodClient),
		informer:       cfg.PodInformer,
		lister:         cfg.PodLister,
		recorder:       cfg.EventRecorder,
		filter:         cfg.PodEventFilterFunc,
		pollInterval:   cfg.StatusPollInterval,
		resyncInterval: cfg.ProviderResyncInterval,
		graceMargin:    cfg.GracePeriodMargin,
		skipEnv:        cfg.SkipDownwardAPIResolution,
		observe:        cfg.ProviderCallObserver,
		pods:           newPodRecords(),
		ready:          make(chan struct{}),
		run:            runonce.New(),
	}
	if pc.lister == nil {
		pc.lister = cfg.PodInformer.Lister()
	}
	if pc.pollInterval == 0 {
		pc.pollInterval = DefaultStatusPollInterval
	}
	if pc.resyncInterval == 0 {
		pc.resyncInterval = DefaultProviderResyncInterval
	}
	if pc.graceMargin == 0 {
		pc.graceMargin = DefaultGracePeriodMargin
	}
	pc.syncedFuncs = append(pc.syncedFuncs, cfg.PodInformer.Informer().HasSynced)
	pc.env.Node = cfg.Node
	pc.env.KeepObjectRefs = cfg.KeepEnvObjectRefs || caps.CopiesEnvObjects
	pc.ips = newPodIPs(pc, cfg)
	pc.env.ServiceVars = &podenv.ServiceVarsMemo{}
	if i := cfg.ConfigMapInformer; i != nil {
		pc.env.ConfigMaps = i.Lister()
		if c := cfg.ObjectClient; c != nil {
			pc.env.ConfigMaps = confirmedConfigMaps{i.Lister(), c}
		}
		pc.configInfs = append(pc.configInfs, i.Informer())
	}
	if i := cfg.SecretInformer; i != nil {
		pc.env.Secrets = i.Lister()
		if c := cfg.ObjectClient; c != nil {
			pc.env.Secrets = confirmedSecrets{i.Lister(), c}
		}
		pc.configInfs = append(pc.configInfs, i.Informer())
	}
	if i := cfg.ServiceInformer; i != nil {
		pc.env.Services = i.Lister()
		pc.syncedFuncs = append(pc.syncedFuncs, i.Informer().HasSynced)
	}
	for _, i := range pc.configInfs {
		pc.syncedFuncs = append(pc.syncedFuncs, i.HasSynced)
	}

	pc.volumes, pc.volumeQueue = newPodVolumes(pc, cfg)
	pc.claims = newPodClaims(pc.caps, cfg.ResourceClaimInformer, cfg.ClaimClient)
	if pc.claims != nil {
		pc.syncedFuncs = append(pc.syncedFuncs, pc.claims.informer.HasSynced)
	}
	pc.prober = newProber(pc)
	pc.syncQueue = queue.New(SyncPodsFromKubernetesQueue, cfg.SyncPodsFromKubernetesRateLimiter,
		orDefault(cfg.SyncPodsFromKubernetesShouldRetryFunc, retryUntilPermanent), pc.syncPodFromKubernetes, queueOptions(cfg)...)
	pc.deleteQueue = queue.New(DeletePodsFromKubernetesQueue, cfg.DeletePodsFromKubernetesRateLimiter,
		orDefault(cfg.DeletePodsFromKubernetesShouldRetryFunc, retryUntilPermanent), pc.deletePodFromKubernetes, queueOptions(cfg)...)
	pc.statusQueue = queue.New(SyncPodStatusFromProviderQueue, cfg.SyncPodStatusFromProviderRateLimiter,
		orDefault(cfg.SyncPodStatusFromProviderShouldRetryFunc, retryUntilPermanent), pc.syncPodStatusFromProvider, queueOptions(cfg)...)
	for _, q := range []*queue.Queue{pc.syncQueue, pc.deleteQueue, pc.statusQueue} {
		q.OnGiveUp(pc.gaveUp)
	}
	pc.stores = pc.perPodStores()
	return pc, nil
}

func orDefault(f, def queue.ShouldRetryFunc) queue.ShouldRetryFunc {
	if f != nil {
		return f
	}
	return def
}

// Ready returns a channel which gets closed once the PodController is ready to
// handle scheduled pods. This channel will never close if there is an error on
// startup. The status of this channel after shutdown is indeterminate.
func (pc *PodController) Ready() <-chan struct{} { return pc.ready }

// Done returns a channel receiver which is closed when the pod controller has
// exited. Once the pod controller has exited you can call `pc.Err()` to see if
// any error occurred.
func (pc *PodController) Done() <-chan struct{} { return pc.run.Done() }

// AfterStop arranges for f to run on a goroutine of its own once the
// controller has stopped (Done is closed), or at once if it has, so that a
// process with many nodes need not keep a goroutine waiting on each.
func (pc *PodController) AfterStop(f func()) { pc.run.AfterFinish(f) }

// Err returns any error that has occurred and caused the pod controller to exit.
func (pc *PodController) Err() error {
	return pc.run.Result()
}

// Run will set up the event handlers for types we are interested in, as well
// as syncing informer caches and starting workers. It will block until the
// context is cancelled, at which point it will shutdown the work queue and
// wait for workers to finish processing their current work items prior to
// returning.
//
// Each queue (four, with volumes) gets up to podSyncWorkers workers. The
// informers in the config must be started by the caller.
//
// Once this returns, you should not re-use the controller.
func (pc *PodController) Run(ctx context.Context, podSyncWorkers int) error {
	if err := pc.Start(ctx, podSyncWorkers); err != nil {
		return err
	}
	<-pc.Done()
	return pc.Err()
}

// Start does what Run does until the controller is ready, and returns
// then: the controller runs on its queues' workers, which start as work
// comes, until ctx ends, and Done closes once it has stopped. A process
// running many nodes holds no goroutine per node while they are idle.
// The informers in the config must be started by the caller: Start waits
// for their caches, and fails if ctx ends first.
func (pc *PodController) Start(ctx context.Context, podSyncWorkers int) error {
	if err := pc.run.Start("pod controller"); err != nil {
		return err
	}
	if podSyncWorkers < 1 {
		err := fmt.Errorf("pod controller: podSyncWorkers must be at least 1, got %d", podSyncWorkers)
		pc.run.Finish(err)
		return err
	}

	ctx, cancel := context.WithCancel(ctx)
	// What stops the controller, in this order, once ctx ends; a start
	// that fails runs it at once.
	var stops []func()
	stop := func(err error) {
		cancel()
		for i := len(stops) - 1; i >= 0; i-- {
			stops[i]()
		}
		pc.run.Finish(err)
	}
	stops = append(stops, func() {
		for _, q := range pc.queues() {
			q.ShutDown()
		}
		if pc.prober != nil {
			pc.prober.Stop()
		}
	})

	registrations, err := pc.addEventHandlers(ctx)
	stops = append(stops, func() {
		for inf, reg := range registrations {
			_ = inf.RemoveEventHandler(reg)
		}
	})
	if err != nil {
		stop(err)
		return err
	}
	synced := append([]cache.InformerSynced(nil), pc.syncedFuncs...)
	for _, reg := range registrations {
		synced = append(synced, reg.HasSynced)
	}
	log.G(ctx).Debug("waiting for informer caches to sync")
	if !cache.WaitForCacheSync(ctx.Done(), synced...) {
		err := fmt.Errorf("pod controller: informer caches did not sync: %w", context.Cause(ctx))
		stop(err)
		return err
	}

	if notifier := pc.caps.Notifier; notifier != nil {
		notifier.NotifyPods(ctx, func(pod *corev1.Pod) { pc.onProviderPod(ctx, pod) })
	} else {
		log.G(ctx).Infof("provider does not notify pod status changes; polling every %s", pc.pollInterval)
		stops = append(stops, every(ctx, pc.pollInterval, 0, pc.pollStatuses))
	}

	for _, q := range pc.queues() {
		q.Start(ctx, podSyncWorkers)
		stops = append(stops, q.Wait)
	}
	// The first resync removes pods the provider kept from before a restart
	// that no longer exist in Kubernetes. The later ones are jittered: a
	// process of a thousand nodes started together would otherwise list a
	// thousand providers' pods at once, every interval.
	stops = append(stops, every(ctx, pc.resyncInterval, resyncJitter, pc.resyncWithProvider))

	close(pc.ready)
	log.G(ctx).Info("pod controller ready")
	context.AfterFunc(ctx, func() { stop(nil) })
	return nil
}

// addEventHandlers connects the informers to the queues.
func (pc *PodController) addEventHandlers(ctx context.Context) (map[cache.SharedIndexInformer]cache.ResourceEventHandlerRegistration, error) {
	regs := map[cache.SharedIndexInformer]cache.ResourceEventHandlerRegistration{}
	podInf := pc.informer.Informer()
	reg, err := podInf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if pod, ok := obj.(*corev1.Pod); ok && pc.accept(ctx, pod) {
				pc.syncQueue.Enqueue(podKey(pod))
			}
		},
		UpdateFunc: func(oldObj, newObj any) {
			oldPod, ok1 := oldObj.(*corev1.Pod)
			newPod, ok2 := newObj.(*corev1.Pod)
			if !ok1 || !ok2 || !pc.accept(ctx, newPod) {
				return
			}
			if r := pc.pods.lookup(podKey(newPod)); r != nil {
				r.informerSaw(newPod.ResourceVersion)
			}
			if needsSync(oldPod, newPod) {
				pc.syncQueue.Enqueue(podKey(newPod))
			}
		},
		DeleteFunc: func(obj any) {
			if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = tomb.Obj
			}
			pod, ok := obj.(*corev1.Pod)
			if !ok || !pc.accept(ctx, pod) {
				return
			}
			// A pod with no record was never handed to the provider, or
			// is stopped and forgotten already: a record made for it now
			// would have it stopped again.
			key := podKey(pod)
			if r := pc.pods.lookup(key); r != nil {
				r.objectGone(pod)
			}
			pc.syncQueue.Enqueue(key)
		},
	})
	if err != nil {
		return regs, err
	}
	regs[podInf] = reg

	// A pod waiting for a ConfigMap or Secret is retried as soon as one
	// appears in its namespace, not at its next backoff.
	retryWaiting := func(obj any) {
		if m, ok := obj.(interface{ GetNamespace() string }); ok {
			for _, key := range pc.pods.waitingForConfig(m.GetNamespace()) {
				pc.syncQueue.Enqueue(key)
			}
		}
	}
	for _, inf := range pc.configInfs {
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(obj any) { retryWaiting(obj); pc.volumeSourceChanged(obj) },
			UpdateFunc: func(_, obj any) { retryWaiting(obj); pc.volumeSourceChanged(obj) },
			DeleteFunc: pc.volumeSourceChanged,
		})
		if err != nil {
			return regs, err
		}
		regs[inf] = reg
	}
	return regs, pc.addClaimHandler(regs)
}

func (pc *PodController) accept(ctx context.Context, pod *corev1.Pod) bool {
	return pc.filter == nil || pc.filter(ctx, pod)
}

func podKey(pod *corev1.Pod) string {
	return pod.Namespace + "/" + pod.Name
}

// SyncPodsFromKubernetesEnqueue queues the pod with key "namespace/name" to be
// reconciled with the provider.
func (pc *PodController) SyncPodsFromKubernetesEnqueue(_ context.Context, key string) {
	pc.syncQueue.Enqueue(key)
}

// DeletePodsFromKubernetesEnqueue queues the pod with key "namespace/name" to
// be removed from Kubernetes (grace period 0) if it is being deleted, once
// its terminal status is written.
func (pc *PodController) DeletePodsFromKubernetesEnqueue(_ context.Context, key string) {
	pc.deleteQueue.Enqueue(key)
}

// DeletePodsFromKubernetesForget clears the retry history of key in the delete queue.
func (pc *PodController) DeletePodsFromKubernetesForget(_ context.Context, key string) {
	pc.deleteQueue.Forget(key)
}

// SyncPodStatusFromProviderEnqueue queues the pod with key "namespace/name" to
// have the provider's latest status written to Kubernetes.
func (pc *PodController) SyncPodStatusFromProviderEnqueue(_ context.Context, key string) {
	pc.statusQueue.Enqueue(key)
}

// StorePod records pod as the provider's latest view of key. Only the pod's
// identity and status are kept, copied: the provider may go on changing its
// object.
func (pc *PodController) StorePod(key string, pod *corev1.Pod) {
	pc.pods.get(key).providerReported(pod)
}

// LoadPod returns the provider's latest view of key (a *corev1.Pod), as
// recorded by StorePod or the provider's notifications, while its status is
// not yet written to Kubernetes; once it is, the informer's pod is the
// reference and LoadPod reports nothing.
func (pc *PodController) LoadPod(key string) (any, bool) {
	r := pc.pods.lookup(key)
	if r == nil {
		return nil, false
	}
	p := r.view().provider
	return p, p != nil
}

// DeletePod forgets everything the controller knows about key.
func (pc *PodController) DeletePod(key string) {
	pc.forget(key)
}

// CheckAndUpdatePod compares the provider's new view of a pod with the one it
// had (obj, as LoadPod returns it) and, if the status changed, records it and
// queues the status to be written to Kubernetes.
func (pc *PodController) CheckAndUpdatePod(_ context.Context, key string, obj any, newPod *corev1.Pod) {
	old, _ := obj.(*corev1.Pod)
	pc.providerSaw(key, old, newPod)
}

// providerSaw takes the provider's new view of a pod, with the restarts it
// does not count added: if its status differs from the old view (nil when
// none), it is recorded and queued for writing.
func (pc *PodController) providerSaw(key string, old, cur *corev1.Pod) {
	rec := pc.pods.get(key)
	if status := rec.view().restarts.apply(&cur.Status); status != &cur.Status {
		cur = withStatus(cur, *status)
	}
	if old != nil && old.UID == cur.UID && statusEqual(&old.Status, &cur.Status) {
		return
	}
	rec.providerReported(cur)
	pc.statusQueue.Enqueue(key)
}

// onProviderPod is the callback handed to the provider's NotifyPods. News of
// a pod Kubernetes no longer has is dropped: there is nowhere to write it.
// A pod the provider reports lost (status.reason ProviderLost) is handled
// as one found missing: its restart policy decides.
func (pc *PodController) onProviderPod(ctx context.Context, pod *corev1.Pod) {
	current, err := pc.lister.Pods(pod.Namespace).Get(pod.Name)
	if apierrors.IsNotFound(err) {
		return
	}
	key := podKey(pod)
	if err == nil && pod.Status.Reason == ReasonProviderLost && (pod.UID == "" || pod.UID == current.UID) {
		if rec := pc.pods.lookup(key); rec != nil && rec.view().applied != nil {
			pc.lost(withPodFields(ctx, current), key, current, rec)
		}
		return
	}
	var old *corev1.Pod
	if r := pc.pods.lookup(key); r != nil {
		old = r.view().provider
	}
	pc.providerSaw(key, old, pod)
}
