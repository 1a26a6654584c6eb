package mock

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// clusterWatch is the process's watch of kwok's objects, one for each
// DynamicInformers factory and so one for all the nodes of a process: it
// asks discovery once, puts one handler on each informer, and one
// goroutine compiles the objects again for every subscribed node on each
// change. At a thousand nodes, a watch of their own would be a thousand
// discovery calls at start and three thousand handlers, each with its
// goroutines and buffer.
type clusterWatch struct {
	key any
	// ready is closed once start has returned; err is why it failed.
	ready chan struct{}
	err   error
	kinds []watchedKind
	// removeHandlers takes the handlers off the process's informers.
	removeHandlers func()
	kick           chan struct{}
	stop           chan struct{}

	// refs counts the nodes holding the watch, subscribed or about to be;
	// guarded by clusterWatches' lock. At zero the watch ends.
	refs int

	mu   sync.Mutex
	subs map[*clusterObjects]struct{}
	// logged are the objects whose error the last round logged, by UID
	// and resourceVersion, and round those of the round going on: an
	// object's error is logged once per change of it for the whole
	// process, not once per node, and again if it fails again later.
	logged, round map[string]bool
}

// clusterWatches are the process's watches, by factory.
var clusterWatches = struct {
	sync.Mutex
	m map[any]*clusterWatch
}{m: map[any]*clusterWatch{}}

// clusterWatchFor returns the process's watch of cfg's factory, started
// and listed, with a reference the caller gives back by unsubscribing
// (or at once on an error).
func clusterWatchFor(ctx context.Context, cfg provider.InitConfig) (*clusterWatch, error) {
	for {
		cw, creator := holdClusterWatch(cfg)
		if creator {
			cw.err = cw.start(ctx, cfg)
			close(cw.ready)
		}
		select {
		case <-cw.ready:
		case <-ctx.Done():
			cw.release()
			return nil, context.Cause(ctx)
		}
		if cw.err == nil {
			return cw, nil
		}
		cw.release()
		// A start cut short by its node's context is not this node's
		// failure: it tries again.
		if creator || ctx.Err() != nil || !errors.Is(cw.err, context.Canceled) {
			return nil, cw.err
		}
	}
}

// holdClusterWatch takes a reference on the watch of cfg's factory,
// creating it when there is none (creator: the caller starts it).
func holdClusterWatch(cfg provider.InitConfig) (cw *clusterWatch, creator bool) {
	var key any = cfg.DynamicInformers
	if !reflect.TypeOf(key).Comparable() {
		key = new(byte) // a factory that cannot be a map key: a watch of its own
	}
	clusterWatches.Lock()
	defer clusterWatches.Unlock()
	if cw = clusterWatches.m[key]; cw == nil {
		cw = &clusterWatch{key: key, ready: make(chan struct{}), kick: make(chan struct{}, 1), stop: make(chan struct{}),
			subs: map[*clusterObjects]struct{}{}, logged: map[string]bool{}, round: map[string]bool{}}
		clusterWatches.m[key] = cw
		creator = true
	}
	cw.refs++
	return cw, creator
}

// release gives a reference back; the last one ends the watch: its
// handlers come off the informers and its loop stops.
func (cw *clusterWatch) release() {
	clusterWatches.Lock()
	defer clusterWatches.Unlock()
	if cw.refs--; cw.refs > 0 {
		return
	}
	if clusterWatches.m[cw.key] == cw {
		delete(clusterWatches.m, cw.key)
	}
	if cw.err == nil {
		close(cw.stop)
		cw.removeHandlers()
	}
}

// start finds which of kwok's resources the API server serves, puts a
// handler on the informer of each, and waits until they are listed; the
// handlers are taken off again when it fails.
func (cw *clusterWatch) start(ctx context.Context, cfg provider.InitConfig) (err error) {
	served, err := cfg.KubeClient.Discovery().ServerResourcesForGroupVersion(kwokGroupVersion)
	if err != nil {
		return fmt.Errorf("--watch-stages: the API server does not serve %s (install kwok's CRDs first): %w", kwokGroupVersion, err)
	}
	gv := schema.GroupVersion{Group: "kwok.x-k8s.io", Version: "v1alpha1"}
	var handlers []func()
	cw.removeHandlers = func() {
		for _, remove := range handlers {
			remove()
		}
	}
	defer func() {
		if err != nil {
			cw.removeHandlers()
		}
	}()
	kick := func() {
		select {
		case cw.kick <- struct{}{}:
		default:
		}
	}
	for _, r := range kwokResources {
		if !slices.ContainsFunc(served.APIResources, func(a metav1.APIResource) bool { return a.Name == r.resource }) {
			if r.required {
				return fmt.Errorf("--watch-stages: the API server serves %s but not its %s (install kwok's Stage CRD)", kwokGroupVersion, r.resource)
			}
			continue
		}
		inf := cfg.DynamicInformers.ForResource(gv.WithResource(r.resource)).Informer()
		reg, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { kick() },
			UpdateFunc: func(any, any) { kick() },
			DeleteFunc: func(any) { kick() },
		})
		if err != nil {
			return err
		}
		handlers = append(handlers, func() { _ = inf.RemoveEventHandler(reg) })
		cw.kinds = append(cw.kinds, watchedKind{kind: r.kind, informer: inf})
	}
	cfg.DynamicInformers.Start(ctx.Done())
	syncCtx, cancel := context.WithTimeout(ctx, syncTimeout)
	defer cancel()
	for _, k := range cw.kinds {
		if !cache.WaitForCacheSync(syncCtx.Done(), k.informer.HasSynced) {
			if ctx.Err() != nil {
				return context.Cause(ctx)
			}
			return fmt.Errorf("--watch-stages: the cluster's kwok %ss were not listed within %s", k.kind, syncTimeout)
		}
	}
	go cw.loop()
	return nil
}

// loop compiles the objects again for every subscribed node after each
// change, until the watch ends; changes that come during a round make one
// more round.
func (cw *clusterWatch) loop() {
	for {
		select {
		case <-cw.stop:
			return
		case <-cw.kick:
		}
		cw.mu.Lock()
		subs := make([]*clusterObjects, 0, len(cw.subs))
		for w := range cw.subs {
			subs = append(subs, w)
		}
		cw.mu.Unlock()
		for _, w := range subs {
			w.compile()
		}
		// The round forgets the objects that no longer fail.
		cw.mu.Lock()
		cw.logged, cw.round = cw.round, map[string]bool{}
		cw.mu.Unlock()
	}
}

// subscribe adds w to the nodes compiled again on each change.
func (cw *clusterWatch) subscribe(w *clusterObjects) {
	cw.mu.Lock()
	defer cw.mu.Unlock()
	cw.subs[w] = struct{}{}
}

// unsubscribe takes w off, and gives its reference back.
func (cw *clusterWatch) unsubscribe(w *clusterObjects) {
	cw.mu.Lock()
	delete(cw.subs, w)
	cw.mu.Unlock()
	cw.release()
}

// report logs an object's error once per change of the object, whichever
// node compiled it first.
func (cw *clusterWatch) report(ctx context.Context, obj *unstructured.Unstructured, err error) {
	key := objectKey(obj)
	cw.mu.Lock()
	seen := cw.logged[key] || cw.round[key]
	cw.round[key] = true
	cw.mu.Unlock()
	if !seen {
		log.G(ctx).WithError(err).Warn("mock: a kwok object in the cluster is passed over")
	}
}
