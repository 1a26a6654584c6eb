// Package kubernetes is a provider that runs a virtual node's pods in
// another Kubernetes cluster: each pod bound to the node in cluster A
// becomes a pod in cluster B, named after it and linked back to it by labels
// and an annotation (see LabelNode and friends), signed
// (AnnotationSignature) so that only the pods this node made are taken for
// A's. B's pod status flows back to A from an informer on B, and B's
// Events about those pods from a watch (relayable); logs, exec, attach and
// port-forward are proxied to B's API server.
//
// The provider is a trust boundary: a pod crosses only if it meets the
// config's Pod Security Standards level, its volume types and runtime class
// are allowed, and only the allowed annotations go with it (podPolicy).
//
// What crosses over: the pod's spec with A's scheduling stripped (B's comes
// from the config), and copies of the ConfigMaps and Secrets its volumes and
// env use, kept in sync with A and deleted once no pod of the node uses
// them, as A's pod specs say (B's are never read for it). The pod controller resolves what only A knows in the env (downward
// API fields but the pod's IPs, which B gives; A's service links) and keeps
// the ConfigMap and Secret references, which point at the copies in B: no
// Secret value is written into B's pod spec. B's pod runs with
// automountServiceAccountToken false; A's token volumes cross only with the
// config's home, as a Secret owned by B's pod holding tokens of A bound to
// A's pod (homeIdentity).
//
// A's Services that the node's pods need are reflected into B with A's
// EndpointSlices (serviceReflector), and everything the node keeps in B is
// bounded (reflectionBudget).
//
// An in-place resize in A is made in B through B's own resize subresource,
// and A shows B's outcome (ResizePod).
//
// The node's capacity is fixed by the config or, with deriveCapacity, B's
// free allocatable, recomputed every 30 s (NotifyCapacity) without this
// node's own pods, which A's scheduler already counts against the node.
package kubernetes

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	metricsclient "k8s.io/metrics/pkg/client/clientset/versioned"
	psapi "k8s.io/pod-security-admission/api"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// sourceIndex indexes B's pods by A's namespace/name.
const sourceIndex = "source"

// Provider runs pods in the remote cluster. Create it with New.
type Provider struct {
	cfg    *Config
	names  namer
	policy *podPolicy
	trust  signer
	provider.NodeBasics
	nodeName  string
	capacity  corev1.ResourceList
	startedAt time.Time

	remote       kubernetes.Interface
	remoteConfig *rest.Config
	pods         cache.SharedIndexInformer
	local        *provider.ResourceManager
	objects      *objectSync
	stats        *remoteStats
	// home gives pods their identity in A; nil without the config's home.
	home *homeIdentity
	// budget bounds what the node writes into B (the config's reflection).
	budget *reflectionBudget
	// recorder records Events on A's pods; nil in unit tests.
	recorder record.EventRecorder

	mu     sync.Mutex
	notify func(*corev1.Pod)

	namespaces sync.Map // per-source namespaces known to exist in B
}

var (
	_ node.Provider            = (*Provider)(nil)
	_ node.LogsProvider        = (*Provider)(nil)
	_ node.ExecProvider        = (*Provider)(nil)
	_ node.AttachProvider      = (*Provider)(nil)
	_ node.PortForwardProvider = (*Provider)(nil)
	_ node.StatsProvider       = (*Provider)(nil)
	_ node.EnvObjectCopier     = (*Provider)(nil)
	_ node.PodVolumeHandler    = (*Provider)(nil)
	_ node.CapabilityDeclarer  = (*Provider)(nil)
)

// CopiesEnvObjects implements node.EnvObjectCopier: the ConfigMaps and
// Secrets env refers to are copied to B like those of volumes.
func (*Provider) CopiesEnvObjects() bool { return true }

// New builds the provider from --provider-config (see Config), connects to
// the remote cluster and waits until its informer has synced, so GetPod and
// GetPods answer from a complete view of B from the start.
func New(ctx context.Context, ic provider.InitConfig) (node.Provider, error) {
	cfg, err := LoadConfig(ic.ConfigPath)
	if err != nil {
		return nil, err
	}
	if errs := validation.IsDNS1123Label(ic.NodeName); len(errs) > 0 {
		return nil, fmt.Errorf("node name %q: %s (it is part of every name in the remote cluster)", ic.NodeName, strings.Join(errs, "; "))
	}
	key, err := cfg.signingKey()
	if err != nil {
		return nil, err
	}
	policy, err := newPodPolicy(cfg)
	if err != nil {
		return nil, err
	}
	restCfg, err := cfg.restConfig()
	if err != nil {
		return nil, err
	}
	remote, err := kubernetes.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("remote cluster: %w", err)
	}
	remoteMetrics, err := metricsclient.NewForConfig(restCfg)
	if err != nil {
		return nil, fmt.Errorf("remote cluster: %w", err)
	}
	if rm := ic.ResourceManager; rm == nil || rm.Pods == nil || rm.PodsSynced == nil || rm.ConfigMaps == nil || rm.Secrets == nil || ic.KubeClient == nil {
		return nil, errors.New("the kubernetes provider reads the node's pods, ConfigMaps and Secrets in the daemon's cluster and records Events there: it runs in the daemon, not as a plugin")
	}
	p := &Provider{
		cfg:          cfg,
		names:        namer{namespace: cfg.Namespace, prefix: cfg.NamespacePrefix, cluster: cfg.SourceCluster, node: ic.NodeName},
		policy:       policy,
		trust:        signer{key: key, cluster: cfg.SourceCluster, node: ic.NodeName},
		NodeBasics:   provider.NodeBasicsFrom(ic),
		nodeName:     ic.NodeName,
		startedAt:    time.Now(),
		remote:       remote,
		remoteConfig: restCfg,
		local:        ic.ResourceManager,
		stats:        &remoteStats{client: remoteMetrics, cpu: map[cpuKey]*cpuCounter{}},
		budget:       newReflectionBudget(cfg.Reflection.MaxObjects, cfg.maxBytes()),
		recorder:     ic.EventRecorder,
	}
	if err := p.checkRemote(ctx); err != nil {
		return nil, err
	}
	if cfg.DeriveCapacity {
		if p.capacity, err = p.remoteCapacity(ctx); err != nil {
			return nil, err
		}
	} else {
		p.capacity = cfg.capacity()
	}

	// Only this node's pods, in the one namespace or in all of them.
	selector := labels.SelectorFromSet(labels.Set{LabelNode: ic.NodeName}).String()
	factory := informers.NewSharedInformerFactoryWithOptions(remote, 0,
		informers.WithNamespace(cfg.Namespace), // "" is all namespaces
		informers.WithTweakListOptions(func(o *metav1.ListOptions) { o.LabelSelector = selector }))
	p.pods = factory.Core().V1().Pods().Informer()
	if err := p.pods.AddIndexers(cache.Indexers{sourceIndex: p.indexBySource}); err != nil {
		return nil, err
	}
	if _, err := p.pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { p.remoteChanged(obj) },
		UpdateFunc: func(_, obj any) { p.remoteChanged(obj) },
		DeleteFunc: p.remoteDeleted,
	}); err != nil {
		return nil, err
	}
	p.objects = newObjectSync(p, factory.Core().V1().ConfigMaps().Lister(), factory.Core().V1().Secrets().Lister())
	factory.Core().V1().ConfigMaps().Informer()
	factory.Core().V1().Secrets().Informer()
	if cfg.Home.APIServer != "" {
		if p.home, err = newHomeIdentity(p, factory.Core().V1().Secrets().Lister()); err != nil {
			return nil, err
		}
	}
	reflector, localFactory, err := p.startServiceReflection(ctx, ic, factory)
	if err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for typ, ok := range factory.WaitForCacheSync(syncCtx.Done()) {
		if !ok {
			return nil, fmt.Errorf("remote cluster: the %v informer did not sync within a minute", typ)
		}
	}
	if localFactory != nil {
		localFactory.Start(ctx.Done())
		for typ, ok := range localFactory.WaitForCacheSync(syncCtx.Done()) {
			if !ok {
				return nil, fmt.Errorf("the %v informer of the daemon's cluster did not sync within a minute", typ)
			}
		}
		go reflector.run(ctx)
	}
	go p.objects.run(ctx)
	go newEventRelay(p, podEventRecorder(ctx, ic.KubeClient, ic.NodeName)).run(ctx)
	return p, nil
}

// checkRemote fails early, with the server named, when B cannot be reached
// or the one remote namespace does not exist.
func (p *Provider) checkRemote(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		return fmt.Errorf("remote cluster %s: %w", p.remoteConfig.Host, err)
	}
	if p.cfg.Namespace != "" {
		if _, err := p.remote.CoreV1().Namespaces().Get(ctx, p.cfg.Namespace, metav1.GetOptions{}); err != nil {
			return fmt.Errorf("namespace %q in the remote cluster: %w", p.cfg.Namespace, err)
		}
	}
	// The Events of the node's pods come back through a watch.
	if _, err := p.remote.CoreV1().Events(p.cfg.Namespace).List(ctx, metav1.ListOptions{FieldSelector: eventSelector, Limit: 1}); err != nil {
		return fmt.Errorf("listing Events in the remote cluster (the provider relays those of its pods; its identity there needs get, list and watch on events): %w", err)
	}
	return nil
}

// indexBySource indexes the pods this node made by their source in A;
// others are not indexed, so remoteFor never finds them.
func (p *Provider) indexBySource(obj any) ([]string, error) {
	pod, ok := obj.(*corev1.Pod)
	if !ok {
		return nil, nil
	}
	ns, name, _, ok := p.trust.sourceOf(pod)
	if !ok {
		return nil, nil
	}
	return []string{ns + "/" + name}, nil
}

// NotifyPods implements node.PodNotifier.
func (p *Provider) NotifyPods(_ context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notify = f
}

func (p *Provider) send(pod *corev1.Pod) {
	p.mu.Lock()
	f := p.notify
	p.mu.Unlock()
	if f != nil {
		f(pod)
	}
}

func (p *Provider) remoteChanged(obj any) {
	remote, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if _, _, _, ok := p.trust.sourceOf(remote); ok {
		p.send(p.localPod(remote))
	}
}

// remoteDeleted reports the final status of a pod gone from B: its last
// status when that was terminal (we deleted it and B's kubelet stopped it),
// else Failed with every container terminated and reason ProviderLost, as a
// pod deleted in B behind our back is lost: the pod controller creates it
// again or leaves it Failed, as its restart policy says.
func (p *Provider) remoteDeleted(obj any) {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	remote, ok := obj.(*corev1.Pod)
	if !ok {
		return
	}
	if _, _, _, ok := p.trust.sourceOf(remote); !ok {
		return
	}
	pod := p.localPod(remote)
	if pod.Status.Phase != corev1.PodSucceeded && pod.Status.Phase != corev1.PodFailed {
		pod.Status.Phase = corev1.PodFailed
		pod.Status.Reason = node.ReasonProviderLost
		pod.Status.Message = "the pod was deleted in the remote cluster"
		now := metav1.Now()
		for _, list := range [][]corev1.ContainerStatus{pod.Status.InitContainerStatuses, pod.Status.ContainerStatuses} {
			for i := range list {
				if list[i].State.Terminated == nil {
					list[i].State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
						ExitCode: 137, Reason: "ContainerStatusUnknown", FinishedAt: now,
						Message: "the pod was deleted in the remote cluster",
					}}
					list[i].Ready = false
					list[i].Started = ptr.To(false)
				}
			}
		}
	}
	p.send(pod)
}

// remoteFor returns B's pod for A's namespace/name: the one not being
// deleted when an older one of the same source is still terminating.
func (p *Provider) remoteFor(namespace, name string) (*corev1.Pod, error) {
	objs, err := p.pods.GetIndexer().ByIndex(sourceIndex, namespace+"/"+name)
	if err != nil {
		return nil, err
	}
	var found *corev1.Pod
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if found == nil || (found.DeletionTimestamp != nil && pod.DeletionTimestamp == nil) {
			found = pod
		}
	}
	if found == nil {
		return nil, errdefs.NotFoundf("pod %s/%s is not in the remote cluster", namespace, name)
	}
	return found, nil
}

// CreatePod checks the pod against the policy, copies the ConfigMaps and
// Secrets it uses, then creates the pod in B. A refusal is
// errdefs.InvalidInput, before anything is written to B.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	remote, err := p.remotePod(pod)
	if err != nil {
		return err
	}
	if err := p.ensureNamespace(ctx, remote.Namespace, pod.Namespace); err != nil {
		return err
	}
	release, err := p.objects.copyFor(ctx, pod)
	if err != nil {
		p.forgetNamespace(remote.Namespace, err)
		return err
	}
	defer release()
	if p.home != nil {
		// The token Secret is there when B's kubelet looks for it, and
		// owned by B's pod once it exists.
		if err := p.home.write(ctx, pod, nil); err != nil {
			return err
		}
	}
	created, err := p.remote.CoreV1().Pods(remote.Namespace).Create(ctx, remote, metav1.CreateOptions{})
	if err == nil && p.home != nil {
		err = p.home.write(ctx, pod, created)
	}
	if apierrors.IsAlreadyExists(err) {
		existing, getErr := p.remote.CoreV1().Pods(remote.Namespace).Get(ctx, remote.Name, metav1.GetOptions{})
		if getErr != nil {
			return getErr
		}
		_, _, uid, ours := p.trust.sourceOf(existing)
		switch {
		case !ours:
			return errdefs.InvalidInputf("pod %s/%s exists in the remote cluster and was not made by node %s: it is not used", remote.Namespace, remote.Name, p.nodeName)
		case uid == pod.UID && p.home != nil:
			return p.home.write(ctx, pod, existing) // created by an earlier attempt
		case uid == pod.UID:
			return nil // created by an earlier attempt
		}
		// An older pod of the same name is still terminating in B; the
		// controller retries until it is gone.
		return fmt.Errorf("pod %s/%s: an older pod of the same name is still in the remote cluster", remote.Namespace, remote.Name)
	}
	p.forgetNamespace(remote.Namespace, err)
	if apierrors.IsInvalid(err) || apierrors.IsForbidden(err) {
		return errdefs.AsInvalidInput(err)
	}
	if err == nil {
		log.G(ctx).WithField("remote", remote.Namespace+"/"+remote.Name).Debug("kubernetes: pod created in the remote cluster")
	}
	return err
}

// forgetNamespace drops a namespace of B from those known to exist when a
// write there found something missing: it may have been deleted in B, and
// is made again on the controller's retry.
func (p *Provider) forgetNamespace(namespace string, err error) {
	if apierrors.IsNotFound(err) {
		p.namespaces.Delete(namespace)
	}
}

// ensureNamespace makes a per-source namespace in B on first use, enforcing
// the policy's Pod Security level there too, so B's admission holds the
// line as well. A namespace of that name a node of this cluster did not
// make is not used.
func (p *Provider) ensureNamespace(ctx context.Context, namespace, source string) error {
	if p.cfg.Namespace != "" {
		return nil
	}
	if _, known := p.namespaces.Load(namespace); known {
		return nil
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name: namespace,
		Labels: map[string]string{
			LabelSourceNamespace:      source,
			psapi.EnforceLevelLabel:   string(p.policy.level.Level),
			psapi.EnforceVersionLabel: p.policy.level.Version.String(),
		},
		Annotations: map[string]string{},
	}}
	p.trust.signNamespace(&ns.ObjectMeta)
	_, err := p.remote.CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		var existing *corev1.Namespace
		if existing, err = p.remote.CoreV1().Namespaces().Get(ctx, namespace, metav1.GetOptions{}); err == nil && !p.trust.ownsNamespace(existing) {
			return errdefs.InvalidInputf("namespace %s exists in the remote cluster and was not made by the provider of cluster %s: it is not used (name it in the config's namespace to use it)", namespace, p.cfg.SourceCluster)
		}
	}
	if err != nil {
		return fmt.Errorf("creating namespace %s in the remote cluster: %w", namespace, err)
	}
	// B's ServiceAccount admission refuses pods until the namespace's
	// default ServiceAccount exists; B's controller makes it too, later.
	sa := &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: "default"}}
	_, err = p.remote.CoreV1().ServiceAccounts(namespace).Create(ctx, sa, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return fmt.Errorf("creating the default ServiceAccount of namespace %s in the remote cluster: %w", namespace, err)
	}
	p.namespaces.Store(namespace, true)
	return nil
}

// UpdatePod carries over what a pod update may change: container images
// (the kubelet restarts such containers; B's does the same).
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	current, err := p.remoteFor(pod.Namespace, pod.Name)
	if err != nil {
		return err
	}
	want, err := p.remotePod(pod)
	if err != nil {
		return err
	}
	updated := current.DeepCopy()
	changed := false
	for i := range updated.Spec.Containers {
		for _, c := range want.Spec.Containers {
			if c.Name == updated.Spec.Containers[i].Name && c.Image != updated.Spec.Containers[i].Image {
				updated.Spec.Containers[i].Image = c.Image
				changed = true
			}
		}
	}
	if !changed {
		return nil
	}
	_, err = p.remote.CoreV1().Pods(current.Namespace).Update(ctx, updated, metav1.UpdateOptions{})
	return err
}

// DeletePod deletes B's pod with A's grace period; its final status comes
// back through the informer.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	if p.home != nil {
		p.home.forget(pod.UID)
	}
	remote, err := p.remoteFor(pod.Namespace, pod.Name)
	if err != nil {
		return err
	}
	opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &remote.UID}}
	switch {
	case pod.DeletionGracePeriodSeconds != nil:
		opts.GracePeriodSeconds = ptr.To(*pod.DeletionGracePeriodSeconds)
	case pod.Spec.TerminationGracePeriodSeconds != nil:
		opts.GracePeriodSeconds = ptr.To(*pod.Spec.TerminationGracePeriodSeconds)
	}
	if alreadyStopping(remote, opts.GracePeriodSeconds) {
		return nil
	}
	err = p.remote.CoreV1().Pods(remote.Namespace).Delete(ctx, remote.Name, opts)
	if apierrors.IsNotFound(err) || apierrors.IsConflict(err) {
		return errdefs.NotFoundf("pod %s/%s is no longer in the remote cluster", pod.Namespace, pod.Name)
	}
	return err
}

// alreadyStopping reports a pod B is deleting with a grace period no
// longer than grace (nil: the pod's own): another DELETE would change
// nothing but cost a request (the pod controller's orphan pass asks again
// for pods A no longer has while they terminate in B).
func alreadyStopping(remote *corev1.Pod, grace *int64) bool {
	if remote.DeletionTimestamp == nil || remote.DeletionGracePeriodSeconds == nil {
		return false
	}
	want := ptr.Deref(grace, ptr.Deref(remote.Spec.TerminationGracePeriodSeconds, corev1.DefaultTerminationGracePeriodSeconds))
	return want >= *remote.DeletionGracePeriodSeconds
}

// GetPod answers from B's informer.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	remote, err := p.remoteFor(namespace, name)
	if err != nil {
		return nil, err
	}
	return p.localPod(remote), nil
}

// GetPodStatus answers from B's informer.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	return provider.PodStatusFrom(ctx, p.GetPod, namespace, name)
}

// GetPods lists this node's pods in B, as A knows them: the pod controller
// deletes those A no longer has (orphans) and adopts the others.
func (p *Provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	var out []*corev1.Pod
	for _, obj := range p.pods.GetStore().List() {
		remote := obj.(*corev1.Pod)
		if _, _, _, ok := p.trust.sourceOf(remote); ok {
			out = append(out, p.localPod(remote))
		}
	}
	return out, nil
}

// String names the provider in logs.
func (p *Provider) String() string {
	return fmt.Sprintf("kubernetes provider for node %s (remote %s)", p.nodeName, p.remoteConfig.Host)
}
