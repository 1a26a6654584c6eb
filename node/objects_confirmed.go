package node

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
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

// confirmMiss is the API server's answer for an object the cache does not
// hold (cacheErr, a NotFound): the object, or NotFound. When the read
// fails otherwise, the cache's answer stands, as it would without a client.
func confirmMiss[T any](cacheErr error, kind, namespace, name string, get func(context.Context, string, metav1.GetOptions) (T, error)) (T, error) {
	ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
	defer cancel()
	obj, err := get(ctx, name, metav1.GetOptions{})
	if err != nil && !apierrors.IsNotFound(err) {
		log.L.WithError(err).WithFields(log.Fields{"kind": kind, "namespace": namespace, "name": name}).
			Debug("cannot confirm an object missing from the cache; taking the cache's answer")
		var none T
		return none, cacheErr
	}
	return obj, err
}

// confirmedConfigMaps is a ConfigMap lister whose misses are confirmed
// with the API server.
type confirmedConfigMaps struct {
	corev1listers.ConfigMapLister
	client corev1client.ConfigMapsGetter
}

func (l confirmedConfigMaps) ConfigMaps(namespace string) corev1listers.ConfigMapNamespaceLister {
	return confirmedConfigMapsIn{l.ConfigMapLister.ConfigMaps(namespace), namespace, l.client.ConfigMaps(namespace)}
}

type confirmedConfigMapsIn struct {
	corev1listers.ConfigMapNamespaceLister
	namespace string
	client    corev1client.ConfigMapInterface
}

func (l confirmedConfigMapsIn) Get(name string) (*corev1.ConfigMap, error) {
	cm, err := l.ConfigMapNamespaceLister.Get(name)
	if !apierrors.IsNotFound(err) {
		return cm, err
	}
	return confirmMiss(err, "ConfigMap", l.namespace, name, l.client.Get)
}

// confirmedSecrets is a Secret lister whose misses are confirmed with the
// API server.
type confirmedSecrets struct {
	corev1listers.SecretLister
	client corev1client.SecretsGetter
}

func (l confirmedSecrets) Secrets(namespace string) corev1listers.SecretNamespaceLister {
	return confirmedSecretsIn{l.SecretLister.Secrets(namespace), namespace, l.client.Secrets(namespace)}
}

type confirmedSecretsIn struct {
	corev1listers.SecretNamespaceLister
	namespace string
	client    corev1client.SecretInterface
}

func (l confirmedSecretsIn) Get(name string) (*corev1.Secret, error) {
	s, err := l.SecretNamespaceLister.Get(name)
	if !apierrors.IsNotFound(err) {
		return s, err
	}
	return confirmMiss(err, "Secret", l.namespace, name, l.client.Get)
}
