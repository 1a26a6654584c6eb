package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"sort"
	"time"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/informers"
	corev1listers "k8s.io/client-go/listers/core/v1"
	discoverylisters "k8s.io/client-go/listers/discovery/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// Kinds of the signatures of reflected Services and EndpointSlices.
const (
	kindService       = "service"
	kindEndpointSlice = "endpointslice"
)

// ManagedBy is the endpointslice.kubernetes.io/managed-by of the
// EndpointSlices the provider writes in B: B's EndpointSlice controllers
// leave slices of another manager alone.
const ManagedBy = "kubernetes-provider.virtual-kubelet.io"

// serviceReflector reflects A's Services, with A's EndpointSlices as their
// endpoints, into the namespaces of B where the node's pods run, under the
// same names, so that the names a pod resolves in A resolve in B. What is
// reflected is decided from A alone: the Services of the namespaces of A
// with a pod this node offloaded (found as objectSync.inUse finds them:
// B's signed pod metadata, A's pod of the same UID), selected by the
// config's services. A Service in B is selector-less, so B's endpoint
// controllers do not manage it; its EndpointSlices are written by the
// provider (managed-by ManagedBy) with A's addresses, which for the
// offloaded pods are those B gave them. A round runs when A's Services or
// EndpointSlices or B's pods change, and every objectResyncInterval.
type serviceReflector struct {
	p *Provider
	// A's, all namespaces.
	services corev1listers.ServiceLister
	slices   discoverylisters.EndpointSliceLister
	// B's, this node's.
	remoteServices corev1listers.ServiceLister
	remoteSlices   discoverylisters.EndpointSliceLister

	selector   labels.Selector
	namespaces map[string]bool // nil: all
	kick       chan struct{}
}

func newServiceReflector(p *Provider, services corev1listers.ServiceLister, slices discoverylisters.EndpointSliceLister,
	remoteServices corev1listers.ServiceLister, remoteSlices discoverylisters.EndpointSliceLister) (*serviceReflector, error) {
	selector, err := labels.Parse(p.cfg.Services.LabelSelector)
	if err != nil {
		return nil, fmt.Errorf("services.labelSelector: %w", err)
	}
	r := &serviceReflector{p: p, services: services, slices: slices, remoteServices: remoteServices, remoteSlices: remoteSlices,
		selector: selector, kick: make(chan struct{}, 1)}
	if len(p.cfg.Services.Namespaces) > 0 {
		r.namespaces = map[string]bool{}
		for _, ns := range p.cfg.Services.Namespaces {
			r.namespaces[ns] = true
		}
	}
	return r, nil
}

// handler queues a round on any change of the informer it is added to.
func (r *serviceReflector) handler() cache.ResourceEventHandler {
	kick := func(any) {
		select {
		case r.kick <- struct{}{}:
		default:
		}
	}
	return cache.ResourceEventHandlerFuncs{AddFunc: kick, UpdateFunc: func(_, obj any) { kick(obj) }, DeleteFunc: kick}
}

// run reflects until ctx ends, from when A's pods are listed (until then
// every reflection would look unneeded).
func (r *serviceReflector) run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), r.p.local.PodsSynced) {
		return
	}
	tick := time.NewTicker(objectResyncInterval)
	defer tick.Stop()
	for {
		r.reconcile(ctx)
		select {
		case <-ctx.Done():
			return
		case <-r.kick:
		case <-tick.C:
		}
	}
}

// offloaded returns A's pods this node runs in B, by A's namespace.
func (p *Provider) offloaded() map[string][]*corev1.Pod {
	out := map[string][]*corev1.Pod{}
	for _, obj := range p.pods.GetStore().List() {
		namespace, name, uid, ok := p.trust.sourceOf(obj.(*corev1.Pod))
		if !ok {
			continue
		}
		pod, err := p.local.Pods.Pods(namespace).Get(name)
		if err != nil || pod.UID != uid {
			continue
		}
		out[namespace] = append(out[namespace], pod)
	}
	return out
}

// wantedService is a Service of A to reflect, and a pod of A that needs it
// (the Events about it go there).
type wantedService struct {
	svc *corev1.Service
	pod *corev1.Pod
}

// wanted returns the Services to reflect, by their place in B
// (namespace/name). Two Services of A for one place (namespaces of A
// sharing the one namespace of B) are one too many: the first, in order of
// A's namespaces, is reflected.
func (r *serviceReflector) wanted(ctx context.Context) map[string]wantedService {
	out := map[string]wantedService{}
	if r.p.cfg.Services.Select == SelectNone {
		return out
	}
	byNamespace := r.p.offloaded()
	namespaces := make([]string, 0, len(byNamespace))
	for ns := range byNamespace {
		if r.namespaces == nil || r.namespaces[ns] {
			namespaces = append(namespaces, ns)
		}
	}
	sort.Strings(namespaces)
	for _, ns := range namespaces {
		remoteNS, err := r.p.names.remoteNamespace(ns)
		if err != nil {
			continue
		}
		services, err := r.services.Services(ns).List(r.selector)
		if err != nil {
			continue
		}
		sort.Slice(services, func(i, j int) bool { return services[i].Name < services[j].Name })
		for _, svc := range services {
			user := r.user(svc, byNamespace[ns])
			if user == nil {
				continue
			}
			place := remoteNS + "/" + svc.Name
			if other, taken := out[place]; taken {
				log.G(ctx).WithField("service", ns+"/"+svc.Name).WithField("reflected", other.svc.Namespace+"/"+other.svc.Name).
					Warn("kubernetes: a Service of another namespace of the source cluster has its name in the remote cluster's namespace: not reflected (use namespacePrefix)")
				continue
			}
			out[place] = wantedService{svc: svc, pod: user}
		}
	}
	return out
}

// user is a pod of pods the Service is reflected for: with select used,
// one its selector matches, else any.
func (r *serviceReflector) user(svc *corev1.Service, pods []*corev1.Pod) *corev1.Pod {
	if r.p.cfg.Services.Select == SelectAll {
		return pods[0]
	}
	if len(svc.Spec.Selector) == 0 {
		return nil
	}
	sel := labels.SelectorFromSet(svc.Spec.Selector)
	for _, pod := range pods {
		if sel.Matches(labels.Set(pod.Labels)) {
			return pod
		}
	}
	return nil
}

// reconcile makes B's reflections those wanted: each Service and its
// slices written where they differ, the others this node made deleted.
func (r *serviceReflector) reconcile(ctx context.Context) {
	want := r.wanted(ctx)
	keepSlices := map[string]bool{}
	for place, w := range want {
		if err := r.reflect(ctx, w, keepSlices); err != nil {
			// Its slices in B stay as they are until a round succeeds.
			existing, _ := r.remoteSlices.List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: w.svc.Name, LabelSourceNamespace: w.svc.Namespace}))
			for _, s := range existing {
				keepSlices[s.Namespace+"/"+s.Name] = true
			}
			r.p.limitEvent(w.pod, err)
			log.G(ctx).WithError(err).WithField("service", place).Warn("kubernetes: reflecting a Service into the remote cluster")
		}
	}
	remoteSlices, _ := r.remoteSlices.List(labels.Everything())
	for _, s := range remoteSlices {
		if !keepSlices[s.Namespace+"/"+s.Name] && r.p.trust.ownsCopy(kindEndpointSlice, s) {
			r.remove(ctx, kindEndpointSlice, s.Namespace, s.Name, s.UID, func(opts metav1.DeleteOptions) error {
				return r.p.remote.DiscoveryV1().EndpointSlices(s.Namespace).Delete(ctx, s.Name, opts)
			})
		}
	}
	remoteServices, _ := r.remoteServices.List(labels.Everything())
	for _, s := range remoteServices {
		if _, ok := want[s.Namespace+"/"+s.Name]; !ok && r.p.trust.ownsCopy(kindService, s) {
			r.remove(ctx, kindService, s.Namespace, s.Name, s.UID, func(opts metav1.DeleteOptions) error {
				return r.p.remote.CoreV1().Services(s.Namespace).Delete(ctx, s.Name, opts)
			})
		}
	}
}

// remove deletes a reflection of this node's, of that UID.
func (r *serviceReflector) remove(ctx context.Context, kind, namespace, name string, uid types.UID, del func(metav1.DeleteOptions) error) {
	err := del(metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err == nil || apierrors.IsNotFound(err) {
		r.p.budget.release(copyKey(kind, namespace, name))
		return
	}
	if !apierrors.IsConflict(err) {
		log.G(ctx).WithError(err).WithField(kind, namespace+"/"+name).Warn("kubernetes: deleting a reflection from the remote cluster")
	}
}

// reflect writes the Service w and its slices into B, marking the slices
// it keeps in keep.
func (r *serviceReflector) reflect(ctx context.Context, w wantedService, keep map[string]bool) error {
	svc := w.svc
	remoteNS, err := r.p.names.remoteNamespace(svc.Namespace)
	if err != nil {
		return err
	}
	want := &corev1.Service{ObjectMeta: r.p.reflectionMeta(kindService, remoteNS, svc.Name, svc.Namespace, svc.Name), Spec: remoteServiceSpec(&svc.Spec)}
	if err := r.p.budget.reserve(copyKey(kindService, remoteNS, svc.Name), objectSize(want)); err != nil {
		return err
	}
	client := r.p.remote.CoreV1().Services(remoteNS)
	have, err := r.remoteServices.Services(remoteNS).Get(svc.Name)
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			r.p.budget.release(copyKey(kindService, remoteNS, svc.Name))
			return fmt.Errorf("service %s/%s exists in the remote cluster and was not made by node %s: it is not used", remoteNS, svc.Name, r.p.nodeName)
		}
	case err != nil:
	case !r.p.trust.ownsCopy(kindService, have):
		r.p.budget.release(copyKey(kindService, remoteNS, svc.Name))
		return fmt.Errorf("service %s/%s in the remote cluster was not made by node %s: it is not used", remoteNS, svc.Name, r.p.nodeName)
	case (have.Spec.ClusterIP == corev1.ClusterIPNone) != (want.Spec.ClusterIP == corev1.ClusterIPNone) || have.Spec.Type != want.Spec.Type:
		// A cluster IP cannot be added or taken away: made again.
		uid := have.UID
		err = client.Delete(ctx, have.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
		if err == nil {
			_, err = client.Create(ctx, want, metav1.CreateOptions{})
		}
	case sameServiceSpec(&have.Spec, &want.Spec):
	default:
		updated := have.DeepCopy()
		updated.Spec.Ports, updated.Spec.ExternalName = want.Spec.Ports, want.Spec.ExternalName
		updated.Spec.SessionAffinity, updated.Spec.SessionAffinityConfig = want.Spec.SessionAffinity, want.Spec.SessionAffinityConfig
		_, err = client.Update(ctx, updated, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("reflecting service %s/%s into the remote cluster: %w", svc.Namespace, svc.Name, err)
	}
	if svc.Spec.Type == corev1.ServiceTypeExternalName {
		return nil
	}
	sources, err := r.slices.EndpointSlices(svc.Namespace).List(labels.SelectorFromSet(labels.Set{discoveryv1.LabelServiceName: svc.Name}))
	if err != nil {
		return err
	}
	for _, src := range sources {
		name, err := r.p.names.remoteName(svc.Namespace, src.Name)
		if err != nil {
			return err
		}
		keep[remoteNS+"/"+name] = true
		if err := r.reflectSlice(ctx, src, remoteNS, name); err != nil {
			return err
		}
	}
	return nil
}

// reflectSlice writes B's copy of A's EndpointSlice src.
func (r *serviceReflector) reflectSlice(ctx context.Context, src *discoveryv1.EndpointSlice, remoteNS, name string) error {
	meta := r.p.reflectionMeta(kindEndpointSlice, remoteNS, name, src.Namespace, src.Name)
	meta.Labels[discoveryv1.LabelServiceName] = src.Labels[discoveryv1.LabelServiceName]
	meta.Labels[discoveryv1.LabelManagedBy] = ManagedBy
	want := &discoveryv1.EndpointSlice{ObjectMeta: meta, AddressType: src.AddressType, Ports: src.Ports}
	for _, e := range src.Endpoints {
		// A's node, zone, hints and pod references mean nothing in B.
		want.Endpoints = append(want.Endpoints, discoveryv1.Endpoint{Addresses: e.Addresses, Conditions: e.Conditions, Hostname: e.Hostname})
	}
	key := copyKey(kindEndpointSlice, remoteNS, name)
	if err := r.p.budget.reserve(key, objectSize(want)); err != nil {
		return err
	}
	client := r.p.remote.DiscoveryV1().EndpointSlices(remoteNS)
	have, err := r.remoteSlices.EndpointSlices(remoteNS).Get(name)
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.Create(ctx, want, metav1.CreateOptions{})
	case err != nil:
	case !r.p.trust.ownsCopy(kindEndpointSlice, have):
		r.p.budget.release(key)
		return fmt.Errorf("endpointslice %s/%s in the remote cluster was not made by node %s: it is not used", remoteNS, name, r.p.nodeName)
	case have.AddressType != want.AddressType:
		uid := have.UID
		err = client.Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	case apiequality.Semantic.DeepEqual(have.Endpoints, want.Endpoints) && apiequality.Semantic.DeepEqual(have.Ports, want.Ports) &&
		have.Labels[discoveryv1.LabelServiceName] == want.Labels[discoveryv1.LabelServiceName]:
	default:
		want.ResourceVersion = have.ResourceVersion
		_, err = client.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("reflecting endpointslice %s/%s into the remote cluster: %w", src.Namespace, src.Name, err)
	}
	return nil
}

// reflectionMeta is the signed metadata of the reflection in B, at
// namespace/name, of A's object sourceNamespace/sourceName.
func (p *Provider) reflectionMeta(kind, namespace, name, sourceNamespace, sourceName string) metav1.ObjectMeta {
	meta := metav1.ObjectMeta{
		Namespace:   namespace,
		Name:        name,
		Labels:      map[string]string{LabelNode: p.nodeName, LabelSourceNamespace: sourceNamespace},
		Annotations: map[string]string{AnnotationSourceName: sourceName},
	}
	p.trust.signCopy(kind, &meta)
	return meta
}

// remoteServiceSpec is B's spec of A's Service: selector-less, of its
// ports (no node ports: B allocates none for it), headless if A's is, an
// ExternalName as it is, any other type a ClusterIP.
func remoteServiceSpec(spec *corev1.ServiceSpec) corev1.ServiceSpec {
	out := corev1.ServiceSpec{Type: corev1.ServiceTypeClusterIP, SessionAffinity: spec.SessionAffinity, SessionAffinityConfig: spec.SessionAffinityConfig}
	if out.SessionAffinity == "" {
		out.SessionAffinity = corev1.ServiceAffinityNone
	}
	switch {
	case spec.Type == corev1.ServiceTypeExternalName:
		out.Type, out.ExternalName = corev1.ServiceTypeExternalName, spec.ExternalName
		out.SessionAffinity, out.SessionAffinityConfig = corev1.ServiceAffinityNone, nil
	case spec.ClusterIP == corev1.ClusterIPNone:
		out.ClusterIP = corev1.ClusterIPNone
	}
	for _, port := range spec.Ports {
		target := port.TargetPort
		if target.IntVal == 0 && target.StrVal == "" {
			target = intstr.FromInt32(port.Port) // as B's API server defaults it
		}
		out.Ports = append(out.Ports, corev1.ServicePort{Name: port.Name, Protocol: port.Protocol, AppProtocol: port.AppProtocol,
			Port: port.Port, TargetPort: target})
	}
	return out
}

// sameServiceSpec reports whether B's spec have has want's ports, name
// and affinity, which are what a reflection sets (B fills in the rest).
func sameServiceSpec(have, want *corev1.ServiceSpec) bool {
	return slices.EqualFunc(have.Ports, want.Ports, func(a, b corev1.ServicePort) bool {
		return a.Name == b.Name && a.Protocol == b.Protocol && a.Port == b.Port && a.TargetPort == b.TargetPort &&
			apiequality.Semantic.DeepEqual(a.AppProtocol, b.AppProtocol)
	}) && have.ExternalName == want.ExternalName && have.SessionAffinity == want.SessionAffinity &&
		apiequality.Semantic.DeepEqual(have.SessionAffinityConfig, want.SessionAffinityConfig)
}

// startServiceReflection sets up the reflection of A's Services: informers
// on A's Services and EndpointSlices (a factory of A's, returned to be
// started) and on B's of this node (in remote, B's factory). With
// services.select none it sets up nothing and returns nils.
func (p *Provider) startServiceReflection(ctx context.Context, ic provider.InitConfig, remote informers.SharedInformerFactory) (*serviceReflector, informers.SharedInformerFactory, error) {
	if p.cfg.Services.Select == SelectNone {
		return nil, nil, nil
	}
	// Fail early, and say why, rather than wait a minute for informers
	// that cannot list.
	if _, err := ic.KubeClient.DiscoveryV1().EndpointSlices("").List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, nil, fmt.Errorf("services: listing EndpointSlices in the daemon's cluster (the daemon needs list and watch on services and endpointslices.discovery.k8s.io to reflect Services; or set services.select: none): %w", err)
	}
	if _, err := p.remote.DiscoveryV1().EndpointSlices(p.cfg.Namespace).List(ctx, metav1.ListOptions{Limit: 1}); err != nil {
		return nil, nil, fmt.Errorf("services: listing EndpointSlices in the remote cluster (the provider's identity there needs services and endpointslices.discovery.k8s.io; or set services.select: none): %w", err)
	}
	local := informers.NewSharedInformerFactory(ic.KubeClient, 0)
	services, slices := local.Core().V1().Services(), local.Discovery().V1().EndpointSlices()
	remoteServices, remoteSlices := remote.Core().V1().Services(), remote.Discovery().V1().EndpointSlices()
	r, err := newServiceReflector(p, services.Lister(), slices.Lister(), remoteServices.Lister(), remoteSlices.Lister())
	if err != nil {
		return nil, nil, err
	}
	for _, informer := range []cache.SharedIndexInformer{services.Informer(), slices.Informer(), remoteServices.Informer(), remoteSlices.Informer(), p.pods} {
		if _, err := informer.AddEventHandler(r.handler()); err != nil {
			return nil, nil, err
		}
	}
	return r, local, nil
}
