package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	corev1client "k8s.io/client-go/kubernetes/typed/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// The ConfigMap and Secret caches can lag the pod informer: a Secret
// created just before a pod that refers to it may not be in the cache yet
// when the pod is synced. A kubelet reads these objects from the API
// server and sees it; so a cache miss here is confirmed with a GET before
// the object is taken for missing (an optional reference skipped for
// good, a mandatory one holding the pod).

// ObjectClient reads the ConfigMaps and Secrets pods refer to from the API
// server (PodControllerConfig.ObjectClient).
type ObjectClient interface {
	corev1client.ConfigMapsGetter
	corev1client.SecretsGetter
}

// confirmTimeout bounds a confirming GET: listers take no context.
const confirmTimeout = 10 * time.Second

// confirmedIn is a namespaced lister whose misses are confirmed with the
// API server's live read: it is a ConfigMapNamespaceLister or a
// SecretNamespaceLister as T is a ConfigMap or a Secret.
type confirmedIn[T any] struct {
	kind, namespace string
	list            func(labels.Selector) ([]T, error)
	cached          func(name string) (T, error)
	live            func(context.Context, string, metav1.GetOptions) (T, error)
}

// List lists the cache's objects.
func (c confirmedIn[T]) List(selector labels.Selector) ([]T, error) { return c.list(selector) }

// Get is the cache's object, else the API server's, else NotFound. When the
// live read fails otherwise, the cache's answer stands, as it would without
// a client.
func (c confirmedIn[T]) Get(name string) (T, error) {
	obj, err := c.cached(name)
	if !apierrors.IsNotFound(err) {
		return obj, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
	defer cancel()
	live, liveErr := c.live(ctx, name, metav1.GetOptions{})
	if liveErr != nil && !apierrors.IsNotFound(liveErr) {
		log.L.WithError(liveErr).WithFields(log.Fields{"kind": c.kind, "namespace": c.namespace, "name": name}).
			Debug("cannot confirm an object missing from the cache; taking the cache's answer")
		return obj, err
	}
	return live, liveErr
}

// confirmedConfigMaps is a ConfigMap lister whose misses are confirmed
// with the API server.
type confirmedConfigMaps struct {
	corev1listers.ConfigMapLister
	client corev1client.ConfigMapsGetter
}

func (l confirmedConfigMaps) ConfigMaps(namespace string) corev1listers.ConfigMapNamespaceLister {
	in := l.ConfigMapLister.ConfigMaps(namespace)
	return confirmedIn[*corev1.ConfigMap]{"ConfigMap", namespace, in.List, in.Get, l.client.ConfigMaps(namespace).Get}
}

// confirmedSecrets is a Secret lister whose misses are confirmed with the
// API server.
type confirmedSecrets struct {
	corev1listers.SecretLister
	client corev1client.SecretsGetter
}

func (l confirmedSecrets) Secrets(namespace string) corev1listers.SecretNamespaceLister {
	in := l.SecretLister.Secrets(namespace)
	return confirmedIn[*corev1.Secret]{"Secret", namespace, in.List, in.Get, l.client.Secrets(namespace).Get}
}
