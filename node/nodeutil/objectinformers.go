package nodeutil

import (
	"k8s.io/client-go/informers"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node"
)

// ObjectInformers shares one factory's ConfigMap and Secret informers among
// the pod controllers of many nodes of one process: each controller's
// handlers are served by a single handler on each informer, not by a
// listener of their own (two goroutines and a buffer each, per node).
// Configure sets them in a node's PodControllerConfig, e.g. from
// Config.ConfigurePodController.
type ObjectInformers struct {
	configMaps corev1informers.ConfigMapInformer
	secrets    corev1informers.SecretInformer
}

// NewObjectInformers wraps factory's ConfigMap and Secret informers. Call
// it once for all the nodes that use factory.
func NewObjectInformers(factory informers.SharedInformerFactory) (*ObjectInformers, error) {
	core := factory.Core().V1()
	cms, err := fanOut(core.ConfigMaps().Informer())
	if err != nil {
		return nil, err
	}
	secrets, err := fanOut(core.Secrets().Informer())
	if err != nil {
		return nil, err
	}
	return &ObjectInformers{
		configMaps: configMapView{cms, core.ConfigMaps().Lister()},
		secrets:    secretView{secrets, core.Secrets().Lister()},
	}, nil
}

// Configure makes c use the shared informers.
func (o *ObjectInformers) Configure(c *node.PodControllerConfig) {
	c.ConfigMapInformer, c.SecretInformer = o.configMaps, o.secrets
}

type configMapView struct {
	inf    cache.SharedIndexInformer
	lister corev1listers.ConfigMapLister
}

func (v configMapView) Informer() cache.SharedIndexInformer   { return v.inf }
func (v configMapView) Lister() corev1listers.ConfigMapLister { return v.lister }

type secretView struct {
	inf    cache.SharedIndexInformer
	lister corev1listers.SecretLister
}

func (v secretView) Informer() cache.SharedIndexInformer { return v.inf }
func (v secretView) Lister() corev1listers.SecretLister  { return v.lister }
