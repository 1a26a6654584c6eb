package kubernetes

import (
	"context"
	"fmt"
	"maps"
	"strings"
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

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// objectResyncInterval is how often the copies in B are compared with their
// sources in A. Both sides are read from informer caches, so a round costs
// API calls only for what changed.
const objectResyncInterval = 5 * time.Second

// objectSync copies the ConfigMaps and Secrets pods use from A to B, keeps
// the copies equal to their sources and deletes those no pod of the node in
// B uses any more. The copies carry the same back-links as pods, so after a
// restart B's informer still knows them.
type objectSync struct {
	p                *Provider
	remoteConfigMaps corev1listers.ConfigMapLister
	remoteSecrets    corev1listers.SecretLister

	// inUse orders garbage collection with CreatePod: a CreatePod holds it
	// for reading from the copy of its objects until its pod is in B (see
	// hold), a collection holds it for writing from its last look at
	// lastCopied to its deletions. So a copy is never deleted between its
	// copy and the creation of the pod that uses it.
	inUse sync.RWMutex

	mu sync.Mutex
	// lastCopied is when a CreatePod last copied each object (by copyKey):
	// a copy used that recently is kept though B's pod informer may not
	// show its pod yet.
	lastCopied map[string]time.Time
	// deleted are the UIDs of the copies collected while B's informer may
	// still list them: such a copy is made again rather than trusted to
	// exist.
	deleted map[string]types.UID
}

// copyGrace is how long after a CreatePod copied an object its copy is
// kept even if B's pod informer shows no pod using it.
const copyGrace = 3 * objectResyncInterval

func copyKey(kind, namespace, name string) string { return kind + "/" + namespace + "/" + name }

func newObjectSync(p *Provider, cms corev1listers.ConfigMapLister, secrets corev1listers.SecretLister) *objectSync {
	return &objectSync{p: p, remoteConfigMaps: cms, remoteSecrets: secrets, lastCopied: map[string]time.Time{}, deleted: map[string]types.UID{}}
}

// hold keeps garbage collection away until the returned release is called:
// CreatePod holds it from the copy of its objects to the creation of its
// pod.
func (s *objectSync) hold() (release func()) {
	s.inUse.RLock()
	return s.inUse.RUnlock
}

// collected reports whether the copy B's informer lists as kind
// namespace/name with uid is one garbage collection deleted.
func (s *objectSync) collected(kind, namespace, name string, uid types.UID) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	gone, ok := s.deleted[copyKey(kind, namespace, name)]
	return ok && gone == uid
}

// copying records that a CreatePod is copying the objects refs of kind in
// A's namespace.
func (s *objectSync) copying(kind, namespace string, refs []objectRef) {
	now := time.Now()
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, r := range refs {
		ns, name := s.p.names.remote(namespace, r.name)
		s.lastCopied[copyKey(kind, ns, name)] = now
	}
}

// copyFor copies what the pod's volumes and env use. A missing mandatory
// object is an error the controller retries, as the kubelet waits for it.
func (s *objectSync) copyFor(ctx context.Context, pod *corev1.Pod) error {
	configMaps, secrets := referencedObjects(pod)
	s.copying("configmap", pod.Namespace, configMaps)
	s.copying("secret", pod.Namespace, secrets)
	err := copyEach(ctx, "configmap", pod.Namespace, configMaps, func(name string) (*corev1.ConfigMap, error) {
		return s.p.local.ConfigMaps.ConfigMaps(pod.Namespace).Get(name)
	}, s.syncConfigMap)
	if err != nil {
		return err
	}
	return copyEach(ctx, "secret", pod.Namespace, secrets, func(name string) (*corev1.Secret, error) {
		return s.p.local.Secrets.Secrets(pod.Namespace).Get(name)
	}, s.syncSecret)
}

// copyEach reads each referenced object of A and syncs its copy in B.
func copyEach[T any](ctx context.Context, kind, namespace string, refs []objectRef, get func(string) (T, error), sync func(context.Context, T) error) error {
	for _, ref := range refs {
		src, err := get(ref.name)
		if apierrors.IsNotFound(err) && ref.optional {
			continue
		}
		if err != nil {
			return fmt.Errorf("%s %s/%s for the remote cluster: %w", kind, namespace, ref.name, err)
		}
		if err := sync(ctx, src); err != nil {
			return err
		}
	}
	return nil
}

func (s *objectSync) copyMeta(src metav1.ObjectMeta) metav1.ObjectMeta {
	ns, name := s.p.names.remote(src.Namespace, src.Name)
	return metav1.ObjectMeta{
		Namespace:   ns,
		Name:        name,
		Labels:      map[string]string{LabelNode: s.p.nodeName, LabelSourceNamespace: src.Namespace},
		Annotations: map[string]string{AnnotationSourceName: src.Name},
	}
}

func (s *objectSync) syncConfigMap(ctx context.Context, src *corev1.ConfigMap) error {
	want := &corev1.ConfigMap{ObjectMeta: s.copyMeta(src.ObjectMeta), Data: src.Data, BinaryData: src.BinaryData}
	client := s.p.remote.CoreV1().ConfigMaps(want.Namespace)
	have, err := s.remoteConfigMaps.ConfigMaps(want.Namespace).Get(want.Name)
	if err == nil && s.collected("configmap", have.Namespace, have.Name, have.UID) {
		err = apierrors.NewNotFound(corev1.Resource("configmaps"), want.Name)
	}
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil // another pod's copy won the race; the resync converges
		}
	case err != nil:
	case apiequality.Semantic.DeepEqual(have.Data, want.Data) && apiequality.Semantic.DeepEqual(have.BinaryData, want.BinaryData):
	default:
		want.ResourceVersion = have.ResourceVersion
		_, err = client.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("copying configmap %s/%s to the remote cluster: %w", src.Namespace, src.Name, err)
	}
	return nil
}

func (s *objectSync) syncSecret(ctx context.Context, src *corev1.Secret) error {
	want := &corev1.Secret{ObjectMeta: s.copyMeta(src.ObjectMeta), Data: src.Data, Type: src.Type}
	client := s.p.remote.CoreV1().Secrets(want.Namespace)
	have, err := s.remoteSecrets.Secrets(want.Namespace).Get(want.Name)
	if err == nil && s.collected("secret", have.Namespace, have.Name, have.UID) {
		err = apierrors.NewNotFound(corev1.Resource("secrets"), want.Name)
	}
	switch {
	case apierrors.IsNotFound(err):
		_, err = client.Create(ctx, want, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			err = nil
		}
	case err != nil:
	case apiequality.Semantic.DeepEqual(have.Data, want.Data):
	default:
		want.ResourceVersion = have.ResourceVersion
		_, err = client.Update(ctx, want, metav1.UpdateOptions{})
	}
	if err != nil {
		return fmt.Errorf("copying secret %s/%s to the remote cluster: %w", src.Namespace, src.Name, err)
	}
	return nil
}

// run brings every copy in B in line with its source, and collects the
// copies no pod uses, until ctx ends. A copy whose source is gone is left
// alone while pods in B may still mount it.
func (s *objectSync) run(ctx context.Context) {
	wait.UntilWithContext(ctx, func(ctx context.Context) {
		s.resync(ctx)
		s.collect(ctx)
	}, objectResyncInterval)
}

func (s *objectSync) resync(ctx context.Context) {
	cms, _ := s.remoteConfigMaps.List(labels.Everything())
	for _, c := range cms {
		if s.collected("configmap", c.Namespace, c.Name, c.UID) {
			continue // deleted: not to be made again but for a pod
		}
		if src, err := s.p.local.ConfigMaps.ConfigMaps(c.Labels[LabelSourceNamespace]).Get(c.Annotations[AnnotationSourceName]); err == nil {
			if err := s.syncConfigMap(ctx, src); err != nil {
				log.G(ctx).WithError(err).Warn("kubernetes: configmap copy out of date")
			}
		}
	}
	secrets, _ := s.remoteSecrets.List(labels.Everything())
	for _, c := range secrets {
		if s.collected("secret", c.Namespace, c.Name, c.UID) {
			continue
		}
		if src, err := s.p.local.Secrets.Secrets(c.Labels[LabelSourceNamespace]).Get(c.Annotations[AnnotationSourceName]); err == nil {
			if err := s.syncSecret(ctx, src); err != nil {
				log.G(ctx).WithError(err).Warn("kubernetes: secret copy out of date")
			}
		}
	}
}

// collect deletes the copies no pod of the node in B uses and no CreatePod
// copied within copyGrace.
func (s *objectSync) collect(ctx context.Context) {
	copies := map[string]types.UID{}
	cms, _ := s.remoteConfigMaps.List(labels.Everything())
	for _, c := range cms {
		copies[copyKey("configmap", c.Namespace, c.Name)] = c.UID
	}
	secrets, _ := s.remoteSecrets.List(labels.Everything())
	for _, c := range secrets {
		copies[copyKey("secret", c.Namespace, c.Name)] = c.UID
	}
	s.mu.Lock()
	for key, uid := range s.deleted {
		if copies[key] != uid {
			delete(s.deleted, key) // B's informer has seen the deletion
		}
	}
	s.mu.Unlock()

	unused := maps.Clone(copies)
	for _, obj := range s.p.pods.GetStore().List() {
		pod := obj.(*corev1.Pod)
		configMaps, secrets := referencedObjects(pod)
		for _, r := range configMaps {
			delete(unused, copyKey("configmap", pod.Namespace, r.name))
		}
		for _, r := range secrets {
			delete(unused, copyKey("secret", pod.Namespace, r.name))
		}
	}
	if len(unused) == 0 {
		return
	}

	s.inUse.Lock()
	defer s.inUse.Unlock()
	for key, uid := range unused {
		s.mu.Lock()
		last, recent := s.lastCopied[key]
		recent = recent && time.Since(last) < copyGrace
		s.mu.Unlock()
		if recent {
			continue
		}
		kind, rest, _ := strings.Cut(key, "/")
		namespace, name, _ := strings.Cut(rest, "/")
		opts := metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}}
		var err error
		if kind == "configmap" {
			err = s.p.remote.CoreV1().ConfigMaps(namespace).Delete(ctx, name, opts)
		} else {
			err = s.p.remote.CoreV1().Secrets(namespace).Delete(ctx, name, opts)
		}
		switch {
		case err == nil || apierrors.IsNotFound(err):
			s.mu.Lock()
			s.deleted[key] = uid
			s.mu.Unlock()
			log.G(ctx).WithField("copy", key).Debug("kubernetes: unused copy deleted from the remote cluster")
		case apierrors.IsConflict(err): // replaced meanwhile by a new copy
		default:
			log.G(ctx).WithError(err).WithField("copy", key).Warn("kubernetes: deleting an unused copy from the remote cluster")
		}
	}
	s.mu.Lock()
	for key, last := range s.lastCopied {
		if time.Since(last) >= copyGrace {
			delete(s.lastCopied, key)
		}
	}
	s.mu.Unlock()
}
