package nodeutil

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	corev1informers "k8s.io/client-go/informers/core/v1"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"
)

// NodeNameIndex is the index PodsByNode adds to the shared pod informer:
// pods by spec.nodeName.
const NodeNameIndex = "spec.nodeName"

// PodsByNode shares one pod informer among many nodes of one process. Each
// node's pod controller gets, from For, a PodInformer that holds only that
// node's pods: its lister reads an index by node name, and its event
// handlers are called only for pods bound to that node. One watch and one
// cache serve every node, and an event costs one map lookup however many
// nodes there are (N handlers on the shared informer would each see every
// event).
//
// The shared informer must hold the pods of every node it serves, e.g. the
// bound pods (field selector spec.nodeName!=""). The caller starts it.
type PodsByNode struct {
	informer cache.SharedIndexInformer
	handlers *dispatcher
}

// NewPodsByNode indexes pods by node name and dispatches the informer's
// events to the nodes' handlers. Call it before the informer starts (the
// index cannot be added to a running informer).
func NewPodsByNode(pods corev1informers.PodInformer) (*PodsByNode, error) {
	inf := pods.Informer()
	err := inf.AddIndexers(cache.Indexers{NodeNameIndex: func(obj any) ([]string, error) {
		if pod, ok := obj.(*corev1.Pod); ok && pod.Spec.NodeName != "" {
			return []string{pod.Spec.NodeName}, nil
		}
		return nil, nil
	}})
	if err != nil {
		return nil, fmt.Errorf("indexing pods by node: %w", err)
	}
	d, err := newDispatcher(inf, nodeOf, func(node string) ([]any, error) {
		return inf.GetIndexer().ByIndex(NodeNameIndex, node)
	})
	if err != nil {
		return nil, err
	}
	return &PodsByNode{informer: inf, handlers: d}, nil
}

func nodeOf(obj any) string {
	if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
		obj = tomb.Obj
	}
	if pod, ok := obj.(*corev1.Pod); ok {
		return pod.Spec.NodeName
	}
	return ""
}

// For returns the PodInformer of node name's pods.
func (p *PodsByNode) For(name string) corev1informers.PodInformer {
	return &nodePodInformer{p: p, node: name}
}

// nodePodInformer is one node's view of the shared pod informer.
type nodePodInformer struct {
	p    *PodsByNode
	node string
}

func (i *nodePodInformer) Informer() cache.SharedIndexInformer {
	return &keyedInformer{SharedIndexInformer: i.p.informer, d: i.p.handlers, key: i.node}
}

func (i *nodePodInformer) Lister() corev1listers.PodLister {
	return &nodePodLister{indexer: i.p.informer.GetIndexer(), node: i.node}
}

// nodePodLister lists one node's pods from the shared cache.
type nodePodLister struct {
	indexer cache.Indexer
	node    string
}

func (l *nodePodLister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	return l.list("", selector)
}

func (l *nodePodLister) list(namespace string, selector labels.Selector) ([]*corev1.Pod, error) {
	objs, err := l.indexer.ByIndex(NodeNameIndex, l.node)
	if err != nil {
		return nil, err
	}
	var out []*corev1.Pod
	for _, obj := range objs {
		pod := obj.(*corev1.Pod)
		if (namespace == "" || pod.Namespace == namespace) && selector.Matches(labels.Set(pod.Labels)) {
			out = append(out, pod)
		}
	}
	return out, nil
}

func (l *nodePodLister) Pods(namespace string) corev1listers.PodNamespaceLister {
	return nodePodNamespaceLister{l, namespace}
}

type nodePodNamespaceLister struct {
	*nodePodLister
	namespace string
}

func (l nodePodNamespaceLister) List(selector labels.Selector) ([]*corev1.Pod, error) {
	return l.list(l.namespace, selector)
}

func (l nodePodNamespaceLister) Get(name string) (*corev1.Pod, error) {
	obj, ok, err := l.indexer.GetByKey(l.namespace + "/" + name)
	if err != nil {
		return nil, err
	}
	if pod, _ := obj.(*corev1.Pod); ok && pod != nil && pod.Spec.NodeName == l.node {
		return pod, nil
	}
	return nil, apierrors.NewNotFound(corev1.Resource("pods"), name)
}
