package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// objectResyncInterval is how often the copies in B are compared with their
// sources in A. Both sides are read from informer caches, so a round costs
// API calls only for what changed.
const objectResyncInterval = 5 * time.Second

// copyGrace is how long after a CreatePod's pod reached B the copies it
// used are kept though B's pod informer may not show the pod yet.
const copyGrace = 3 * objectResyncInterval

// objectSync copies the ConfigMaps and Secrets pods use from A to B, keeps
// the copies equal to their sources and deletes those no pod of the node in
// B uses any more.
//
// What is copied is decided by A alone: CreatePod copies what A's pod
// refers to; the resync and the collection follow the references of A's
// pods (their specs in A, ephemeral containers included) that this node
// made a pod for in B (see inUse). B's pod specs are never read for it:
// the signature covers a pod's metadata only, and a writer in B can add
// ephemeral containers to a signed pod, or make it again with its
// metadata and another spec. The labels and annotations of B's ConfigMaps
// and Secrets decide nothing either: a copy is touched only if its
// signature says this node made it, so an object of B's users is never
// written, adopted nor deleted.
type objectSync struct {
	p     *Provider
	kinds map[string]copyKind

	mu sync.Mutex
	// collected is signalled when the collection of a copy ends.
	collected *sync.Cond
	// inFlight counts, by copyKey, the CreatePods using each copy from its
	// copy until their pod is in B; collection spares those.
	inFlight map[string]int
	// lastUsed is when the last such CreatePod was done with each copy.
	lastUsed map[string]time.Time
	// collecting are the copies being deleted: a CreatePod waits for the
	// deletion, then copies again.
	collecting map[string]bool
	// deleted are the UIDs of the copies collected while B's informer may
	// still list them: such a copy is made again rather than trusted to
	// exist.
	deleted map[string]types.UID
}

// copyKinds are the kinds copied, in the order CreatePod copies them.
var copyKinds = []string{kindConfigMap, kindSecret}

func copyKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func newObjectSync(p *Provider, cms corev1listers.ConfigMapLister, secrets corev1listers.SecretLister) *objectSync {
	s := &objectSync{p: p, inFlight: map[string]int{}, lastUsed: map[string]time.Time{}, collecting: map[string]bool{}, deleted: map[string]types.UID{}}
	s.collected = sync.NewCond(&s.mu)
	s.kinds = map[string]copyKind{
		kindConfigMap: &copier[*corev1.ConfigMap]{
			kind: kindConfigMap, s: s,
			source: func(ns, name string) (*corev1.ConfigMap, error) { return p.local.ConfigMaps.ConfigMaps(ns).Get(name) },
			cached: func(ns, name string) (*corev1.ConfigMap, error) { return cms.ConfigMaps(ns).Get(name) },
			list:   func() ([]*corev1.ConfigMap, error) { return cms.List(labels.Everything()) },
			client: func(ns string) remoteClient[*corev1.ConfigMap] { return p.remote.CoreV1().ConfigMaps(ns) },
			build: func(src *corev1.ConfigMap, meta metav1.ObjectMeta) *corev1.ConfigMap {
				return &corev1.ConfigMap{ObjectMeta: meta, Data: src.Data, BinaryData: src.BinaryData}
			},
			same: func(have, want *corev1.ConfigMap) bool {
				return apiequality.Semantic.DeepEqual(have.Data, want.Data) && apiequality.Semantic.DeepEqual(have.BinaryData, want.BinaryData)
			},
		},
		kindSecret: &copier[*corev1.Secret]{
			kind: kindSecret, s: s,
			source: func(ns, name string) (*corev1.Secret, error) { return p.local.Secrets.Secrets(ns).Get(name) },
			cached: func(ns, name string) (*corev1.Secret, error) { return secrets.Secrets(ns).Get(name) },
			list:   func() ([]*corev1.Secret, error) { return secrets.List(labels.Everything()) },
			client: func(ns string) remoteClient[*corev1.Secret] { return p.remote.CoreV1().Secrets(ns) },
			build: func(src *corev1.Secret, meta metav1.ObjectMeta) *corev1.Secret {
				return &corev1.Secret{ObjectMeta: meta, Data: src.Data, Type: src.Type}
			},
			same: func(have, want *corev1.Secret) bool { return apiequality.Semantic.DeepEqual(have.Data, want.Data) },
		},
	}
	return s
}

// copyKind is the copying of one kind of object.
type copyKind interface {
	// sync makes B's copy of A's object namespace/name equal to it; a
	// missing optional object is skipped.
	sync(ctx context.Context, namespace, name string, optional bool) error
	// owned lists the copies in B this node made.
	owned() []metav1.Object
	// remove deletes the copy of that UID.
	remove(ctx context.Context, namespace, name string, uid types.UID) error
}

// remoteClient is the part of client-go's typed clients a copier uses.
type remoteClient[T any] interface {
	Get(context.Context, string, metav1.GetOptions) (T, error)
	Create(context.Context, T, metav1.CreateOptions) (T, error)
	Update(context.Context, T, metav1.UpdateOptions) (T, error)
	Delete(context.Context, string, metav1.DeleteOptions) error
}

// copier copies objects of type T from A to B.
type copier[T metav1.Object] struct {
	kind   string
	s      *objectSync
	source func(namespace, name string) (T, error) // A's, from its informer
	cached func(namespace, name string) (T, error) // B's, from its informer
	list   func() ([]T, error)                     // B's labelled with this node
	client func(namespace string) remoteClient[T]
	build  func(src T, meta metav1.ObjectMeta) T // the copy
	same   func(have, want T) bool               // whether have's content is want's
}

func (c *copier[T]) sync(ctx context.Context, namespace, name string, optional bool) error {
	src, err := c.source(namespace, name)
	if apierrors.IsNotFound(err) && optional {
		return nil
	}
	if err != nil {
		return fmt.Errorf("%s %s/%s for the remote cluster: %w", c.kind, namespace, name, err)
	}
	p := c.s.p
	meta, err := p.copyMeta(c.kind, namespace, name)
	if err != nil {
		return err
	}
	want := c.build(src, meta)
	key := copyKey(c.kind, meta.Namespace, meta.Name)
	if err := p.budget.reserve(key, objectSize(want)); err != nil {
		return fmt.Errorf("copying %s %s/%s to the remote cluster: %w", c.kind, namespace, name, err)
	}
	client := c.client(meta.Namespace)
	have, err := c.cached(meta.Namespace, meta.Name)
	if err == nil && c.s.wasCollected(c.kind, have) {
		err = apierrors.NewNotFound(corev1.Resource(c.kind+"s"), meta.Name)
	}
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			// Ours, made by another pod's copy (the resync converges), or
			// not: B's informer only lists objects labelled with this node.
			if have, err = client.Get(ctx, meta.Name, metav1.GetOptions{}); err == nil && !p.trust.ownsCopy(c.kind, have) {
				p.budget.release(key)
				return c.notOurs(have)
			}
		}
	case err != nil:
	case !p.trust.ownsCopy(c.kind, have):
		p.budget.release(key)
		return c.notOurs(have)
	case c.same(have, want):
	default:
		want.SetResourceVersion(have.GetResourceVersion())
		_, err = client.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("copying %s %s/%s to the remote cluster: %w", c.kind, namespace, name, err)
	}
	return nil
}

// notOurs is the error for an object in B of a copy's name this node did
// not make: it is neither used nor changed.
func (c *copier[T]) notOurs(have T) error {
	return errdefs.InvalidInputf("%s %s/%s exists in the remote cluster and was not made by node %s: it is not used", c.kind, have.GetNamespace(), have.GetName(), c.s.p.nodeName)
}

func (c *copier[T]) owned() []metav1.Object {
	all, _ := c.list()
	var out []metav1.Object
	for _, o := range all {
		if c.s.p.trust.ownsCopy(c.kind, o) {
			out = append(out, o)
		}
	}
	return out
}

func (c *copier[T]) remove(ctx context.Context, namespace, name string, uid types.UID) error {
	return c.client(namespace).Delete(ctx, name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
}

// copyPlace is the namespace and name in B of the copy of A's object
// namespace/name.
func (p *Provider) copyPlace(namespace, name string) (remoteNamespace, remoteName string, err error) {
	if remoteNamespace, err = p.names.remoteNamespace(namespace); err != nil {
		return "", "", err
	}
	remoteName, err = p.names.remoteName(namespace, name)
	return remoteNamespace, remoteName, err
}

// copyMeta is the metadata of B's copy of A's object namespace/name of kind,
// signed.
func (p *Provider) copyMeta(kind, namespace, name string) (metav1.ObjectMeta, error) {
	ns, remoteName, err := p.copyPlace(namespace, name)
	if err != nil {
		return metav1.ObjectMeta{}, err
	}
	return p.reflectionMeta(kind, ns, remoteName, namespace, name), nil
}

// wasCollected reports whether the copy B's informer lists is one
// collection deleted.
func (s *objectSync) wasCollected(kind string, obj metav1.Object) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	gone, ok := s.deleted[copyKey(kind, obj.GetNamespace(), obj.GetName())]
	return ok && gone == obj.GetUID()
}

// copyFor copies what the pod's volumes and env use and returns the release
// to call once the pod is in B (or will not be): until then, and for
// copyGrace after, collection spares those copies. A missing mandatory
// object is an error the controller retries, as the kubelet waits for it.
func (s *objectSync) copyFor(ctx context.Context, pod *corev1.Pod) (release func(), err error) {
	refs := referencedObjects(&pod.Spec)
	var keys []string
	for _, kind := range copyKinds {
		for _, r := range refs[kind] {
			ns, name, err := s.p.copyPlace(pod.Namespace, r.name)
			if err != nil {
				return nil, err
			}
			keys = append(keys, copyKey(kind, ns, name))
		}
	}
	release = s.use(keys)
	for _, kind := range copyKinds {
		for _, r := range refs[kind] {
			if err := s.kinds[kind].sync(ctx, pod.Namespace, r.name, r.optional); err != nil {
				s.p.limitEvent(pod, err)
				release()
				return nil, err
			}
		}
	}
	return release, nil
}

// use marks the copies keys in use until release is called, once any
// collection of them under way has ended.
func (s *objectSync) use(keys []string) (release func()) {
	s.mu.Lock()
	for slices.ContainsFunc(keys, func(k string) bool { return s.collecting[k] }) {
		s.collected.Wait()
	}
	for _, k := range keys {
		s.inFlight[k]++
	}
	s.mu.Unlock()
	return func() {
		now := time.Now()
		s.mu.Lock()
		defer s.mu.Unlock()
		for _, k := range keys {
			if s.inFlight[k]--; s.inFlight[k] == 0 {
				delete(s.inFlight, k)
			}
			s.lastUsed[k] = now
		}
	}
}

// startCollecting claims the copy key for deletion unless a CreatePod is
// using it or used it within copyGrace.
func (s *objectSync) startCollecting(key string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.inFlight[key] > 0 || time.Since(s.lastUsed[key]) < copyGrace {
		return false
	}
	s.collecting[key] = true
	return true
}

// endCollecting ends the deletion of key, which removed uid if gone.
func (s *objectSync) endCollecting(key string, uid types.UID, gone bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.collecting, key)
	if gone {
		s.deleted[key] = uid
	}
	s.collected.Broadcast()
}

// run brings every copy in B in line with its source, and collects the
// copies no pod uses, until ctx ends. It starts once A's pods are listed:
// until then every copy would look unused.
func (s *objectSync) run(ctx context.Context) {
	if !cache.WaitForCacheSync(ctx.Done(), s.p.local.PodsSynced) {
		return
	}
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		s.resync(ctx)
		s.collect(ctx)
		if s.p.home != nil {
			s.p.home.prune(ctx)
		}
	}, objectResyncInterval)
}

// sourceRef is an object of A a pod of this node uses: pod, one of those
// that do.
type sourceRef struct {
	kind, namespace, name string
	pod                   *corev1.Pod
}

// inUse returns the objects of A in use, by the copyKey of their copies:
// those the specs of A's pods refer to, ephemeral containers included,
// for each pod of A this node made a pod for in B (B's signed pod, of the
// same UID, is there). Only the metadata of B's pods is read, which the
// signature covers; their specs, which a writer in B can change, are not,
// and pods of B's users are not looked at.
func (s *objectSync) inUse() map[string]sourceRef {
	out := map[string]sourceRef{}
	for _, obj := range s.p.pods.GetStore().List() {
		namespace, name, uid, ok := s.p.trust.sourceOf(obj.(*corev1.Pod))
		if !ok {
			continue
		}
		pod, err := s.p.local.Pods.Pods(namespace).Get(name)
		if err != nil || pod.UID != uid {
			continue // A's pod is gone, or B's is an older one's
		}
		for kind, refs := range referencedObjects(&pod.Spec) {
			for _, r := range refs {
				if copyNS, copyName, err := s.p.copyPlace(namespace, r.name); err == nil {
					out[copyKey(kind, copyNS, copyName)] = sourceRef{kind, namespace, r.name, pod}
				}
			}
		}
	}
	return out
}

// resync brings the copies the pods of this node in B use in line with
// their sources in A. A copy whose source is gone is left as it is while
// pods may still mount it.
func (s *objectSync) resync(ctx context.Context) {
	for _, ref := range s.inUse() {
		if err := s.kinds[ref.kind].sync(ctx, ref.namespace, ref.name, true); err != nil {
			s.p.limitEvent(ref.pod, err)
			log.G(ctx).WithError(err).Warn("kubernetes: copy out of date")
		}
	}
}

// collect deletes the copies this node made that no pod of the node in B
// uses and no CreatePod used within copyGrace, one at a time, holding off
// only the CreatePods of the copy being deleted.
func (s *objectSync) collect(ctx context.Context) {
	used := s.inUse()
	listed := map[string]types.UID{}
	for _, kind := range copyKinds {
		k := s.kinds[kind]
		for _, c := range k.owned() {
			key := copyKey(kind, c.GetNamespace(), c.GetName())
			listed[key] = c.GetUID()
			if _, ok := used[key]; ok || s.wasCollected(kind, c) || !s.startCollecting(key) {
				continue
			}
			err := k.remove(ctx, c.GetNamespace(), c.GetName(), c.GetUID())
			gone := err == nil || apierrors.IsNotFound(err)
			s.endCollecting(key, c.GetUID(), gone)
			switch {
			case gone:
				s.p.budget.release(key)
				log.G(ctx).WithField("copy", key).Debug("kubernetes: unused copy deleted from the remote cluster")
			case apierrors.IsConflict(err): // replaced meanwhile by a new copy
			default:
				log.G(ctx).WithError(err).WithField("copy", key).Warn("kubernetes: deleting an unused copy from the remote cluster")
			}
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for key, uid := range s.deleted {
		if listed[key] != uid {
			delete(s.deleted, key) // B's informer has seen the deletion
		}
	}
	for key, last := range s.lastUsed {
		if time.Since(last) >= copyGrace {
			delete(s.lastUsed, key)
		}
	}
}

// objectSize is what obj takes in B's etcd: its protobuf encoding.
func objectSize(obj any) int {
	if s, ok := obj.(interface{ Size() int }); ok {
		return s.Size()
	}
	return 0
}
