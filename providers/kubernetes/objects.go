package kubernetes

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// objectResyncInterval is how often the copies in B are compared with their
// sources in A. Both sides are read from informer caches, so a round costs
// API calls only for what changed.
const objectResyncInterval = 5 * time.Second

// objectSync copies the ConfigMaps and Secrets pods use from A to B and
// keeps the copies equal to their sources. The copies carry the same
// back-links as pods, so after a restart B's informer still knows them.
type objectSync struct {
	p                *Provider
	remoteConfigMaps corev1listers.ConfigMapLister
	remoteSecrets    corev1listers.SecretLister
}

func newObjectSync(p *Provider, cms corev1listers.ConfigMapLister, secrets corev1listers.SecretLister) *objectSync {
	return &objectSync{p: p, remoteConfigMaps: cms, remoteSecrets: secrets}
}

// copyFor copies what the pod's volumes use. A missing mandatory object is
// an error the controller retries, as the kubelet waits for it.
func (s *objectSync) copyFor(ctx context.Context, pod *corev1.Pod) error {
	configMaps, secrets := referencedObjects(pod)
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

// run brings every copy in B in line with its source until ctx ends. A copy
// whose source is gone is left alone: pods in B may still mount it.
func (s *objectSync) run(ctx context.Context) {
	t := time.NewTicker(objectResyncInterval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		s.resync(ctx)
	}
}

func (s *objectSync) resync(ctx context.Context) {
	cms, _ := s.remoteConfigMaps.List(labels.Everything())
	for _, c := range cms {
		if src, err := s.p.local.ConfigMaps.ConfigMaps(c.Labels[LabelSourceNamespace]).Get(c.Annotations[AnnotationSourceName]); err == nil {
			if err := s.syncConfigMap(ctx, src); err != nil {
				log.G(ctx).WithError(err).Warn("kubernetes: configmap copy out of date")
			}
		}
	}
	secrets, _ := s.remoteSecrets.List(labels.Everything())
	for _, c := range secrets {
		if src, err := s.p.local.Secrets.Secrets(c.Labels[LabelSourceNamespace]).Get(c.Annotations[AnnotationSourceName]); err == nil {
			if err := s.syncSecret(ctx, src); err != nil {
				log.G(ctx).WithError(err).Warn("kubernetes: secret copy out of date")
			}
		}
	}
}
