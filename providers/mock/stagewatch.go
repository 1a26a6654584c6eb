package mock

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/stage"
	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/usage"
)

// With --watch-stages the mock also runs by the kwok objects in the
// cluster, as kwok does with its CRDs installed: Stages, ResourceUsages
// and ClusterResourceUsages, watched once for all the process's nodes
// (InitConfig.DynamicInformers). On every change each node compiles them
// again, beside its --stage-config files, which win over an object of the
// same kind and name. An object that does not compile is passed over and
// logged, naming it and the field, once per change of it; the others
// still apply. New stages apply to the pods created from then on and to
// the pods they already run; usage applies to every pod the annotations
// do not script.
//
// The watch is the process's (clusterWatch); each node subscribes to it
// with a clusterObjects, which compiles for that node: the stages'
// templates name it.

// kwokGroupVersion is where kwok's CRDs serve its objects.
const kwokGroupVersion = "kwok.x-k8s.io/v1alpha1"

// kwokResources are the resources watched, by the kind they serve.
var kwokResources = []struct {
	kind, resource string
	required       bool
}{
	{stage.KindStage, "stages", true},
	{usage.KindResourceUsage, "resourceusages", false},
	{usage.KindClusterResourceUsage, "clusterresourceusages", false},
}

// syncTimeout bounds the first list of the cluster's kwok objects.
const syncTimeout = time.Minute

// clusterObjects follows the kwok objects of the cluster for one node,
// through the process's clusterWatch.
type clusterObjects struct {
	ctx   context.Context // the provider's: it logs with it
	p     *Provider
	env   stage.Env
	files *stage.Set
	pods  corev1listers.PodLister
	watch *clusterWatch

	// mu serializes compiles: the first runs in the subscriber, later
	// ones in the watch's loop. compiled are the Stages compiled, by UID
	// and resourceVersion: an unchanged Stage stays the same
	// *stage.Stage, so the pods waiting for it keep waiting
	// (scheduleStage).
	mu       sync.Mutex
	compiled map[string]*stage.Stage
}

type watchedKind struct {
	kind     string
	informer cache.SharedIndexInformer
}

// watchClusterObjects starts following the cluster's kwok objects for p,
// whose stage files compiled to files, until ctx ends, and compiles them
// once before it returns, so that the first pods see them.
func watchClusterObjects(ctx context.Context, p *Provider, cfg provider.InitConfig, env stage.Env, files *stage.Set) error {
	if cfg.DynamicInformers == nil || cfg.KubeClient == nil {
		return fmt.Errorf("--watch-stages needs the daemon's API client: it does not work in a plugin process")
	}
	cw, err := clusterWatchFor(ctx, cfg)
	if err != nil {
		return err
	}
	w := &clusterObjects{ctx: ctx, p: p, env: env, files: files, watch: cw, compiled: map[string]*stage.Stage{}}
	if cfg.ResourceManager != nil {
		w.pods = cfg.ResourceManager.Pods
	}
	cw.subscribe(w)
	w.compile()
	context.AfterFunc(ctx, func() { cw.unsubscribe(w) })
	return nil
}

// compile compiles the cluster's objects with the files' and gives the
// result to the provider and its node stages.
func (w *clusterObjects) compile() {
	w.mu.Lock()
	defer w.mu.Unlock()
	ctx := w.ctx
	if ctx.Err() != nil {
		return
	}
	var stages []*stage.Stage
	compiled := map[string]*stage.Stage{}
	defer func() { w.compiled = compiled }()
	foreign := w.files.Foreign()
	for _, k := range w.watch.kinds {
		for _, obj := range sortedObjects(k.informer) {
			where := fmt.Sprintf("the cluster's %s %s", k.kind, objectName(obj))
			js, err := json.Marshal(obj.Object)
			if err != nil {
				w.watch.report(ctx, obj, fmt.Errorf("%s: %w", where, err))
				continue
			}
			if k.kind == stage.KindStage {
				key := objectKey(obj)
				st, ok := w.compiled[key]
				if !ok {
					// The stage's errors name it.
					if st, err = stage.ParseStage("the cluster", js, w.env); err != nil {
						w.watch.report(ctx, obj, err)
						continue
					}
				}
				compiled[key] = st
				stages = append(stages, st)
				continue
			}
			// Usage objects compile together (names must differ):
			// one that fails with those before it is passed over.
			more := append(slices.Clip(foreign), stage.Foreign{Kind: k.kind, Where: where, JSON: js})
			if _, err := usage.Compile(more, usage.Options{}); err != nil {
				w.watch.report(ctx, obj, err)
				continue
			}
			foreign = more
		}
	}
	set, clashes := w.files.With(stages)
	for _, st := range clashes {
		log.G(ctx).WithField("stage", st.Name()).Warn("mock: a Stage in the cluster has the name of one in a --stage-config file, which wins")
	}
	use, err := usage.Compile(foreign, usage.Options{})
	if err != nil { // each object compiled with those before it
		log.G(ctx).WithError(err).Error("mock: the cluster's usage objects")
		return
	}
	if use.Empty() {
		use = nil
	}
	w.p.restage(set, use, w.podObject)
}

// podObject is the pod of the node's informer; nil when it is not there.
func (w *clusterObjects) podObject(namespace, name string) *corev1.Pod {
	if w.pods == nil {
		return nil
	}
	pod, err := w.pods.Pods(namespace).Get(name)
	if err != nil {
		return nil
	}
	return pod
}

// sortedObjects are the informer's objects by namespace and name, so that
// every node compiles them in the same order.
func sortedObjects(inf cache.SharedIndexInformer) []*unstructured.Unstructured {
	var out []*unstructured.Unstructured
	for _, o := range inf.GetStore().List() {
		if u, ok := o.(*unstructured.Unstructured); ok {
			out = append(out, u)
		}
	}
	slices.SortFunc(out, func(a, b *unstructured.Unstructured) int {
		if c := strings.Compare(a.GetNamespace(), b.GetNamespace()); c != 0 {
			return c
		}
		return strings.Compare(a.GetName(), b.GetName())
	})
	return out
}

// objectKey names one version of an object.
func objectKey(obj *unstructured.Unstructured) string {
	return string(obj.GetUID()) + "/" + obj.GetResourceVersion()
}

func objectName(obj *unstructured.Unstructured) string {
	if ns := obj.GetNamespace(); ns != "" {
		return fmt.Sprintf("%q", ns+"/"+obj.GetName())
	}
	return fmt.Sprintf("%q", obj.GetName())
}

// restage makes set and use the provider's stages and usage objects: the
// pods they run take their next stage from set, and every pod the
// annotations do not script has the usage use gives it.
func (p *Provider) restage(set *stage.Set, use *usage.Set, podObject func(namespace, name string) *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.stages, p.usage = set, use
	now := p.clock.Now()
	for _, ps := range p.pods {
		if ps.staged != nil {
			p.scheduleStage(ps)
		}
		if pod := podObject(ps.pod.namespace, ps.pod.name); pod != nil && pod.UID == ps.pod.uid && !scripted(pod) {
			p.reattachUsage(ps, pod, now)
		}
	}
	if p.nodeStages != nil {
		p.nodeStages.restage(set.Nodes())
	}
}
