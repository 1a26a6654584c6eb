package nodeutil

import (
	"errors"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"
)

// dispatcher serves many event handlers from one handler on a shared
// informer. client-go gives each handler a listener of its own (two
// goroutines and a buffer that starts at a thousand entries); at 1,000
// nodes that was 2,000 listeners for each informer. Handlers are added
// under a key, and an event goes to the handlers of the key of its object.
// They run one after another on the informer's goroutine, so they must be
// quick (the pod controller's only enqueue).
type dispatcher struct {
	reg cache.ResourceEventHandlerRegistration
	// keyOf says whose an object is ("" for no one's); current lists a
	// key's objects in the cache, which a new handler gets first.
	keyOf   func(obj any) string
	current func(key string) ([]any, error)

	mu       sync.RWMutex
	handlers map[string][]*keyedHandler
}

type keyedHandler struct{ h cache.ResourceEventHandler }

func newDispatcher(inf cache.SharedIndexInformer, keyOf func(any) string, current func(string) ([]any, error)) (*dispatcher, error) {
	d := &dispatcher{keyOf: keyOf, current: current, handlers: map[string][]*keyedHandler{}}
	var err error
	d.reg, err = inf.AddEventHandler(cache.ResourceEventHandlerDetailedFuncs{
		AddFunc: func(obj any, initial bool) {
			d.each(keyOf(obj), func(h cache.ResourceEventHandler) { h.OnAdd(obj, initial) })
		},
		UpdateFunc: d.update,
		DeleteFunc: func(obj any) { d.each(keyOf(obj), func(h cache.ResourceEventHandler) { h.OnDelete(obj) }) },
	})
	if err != nil {
		return nil, err
	}
	return d, nil
}

// update routes an update to its object's key. An object whose key changed
// (a pod bound by the scheduler) is gone for the old key and new to the new.
func (d *dispatcher) update(oldObj, newObj any) {
	before, after := d.keyOf(oldObj), d.keyOf(newObj)
	if before == after {
		d.each(after, func(h cache.ResourceEventHandler) { h.OnUpdate(oldObj, newObj) })
		return
	}
	d.each(before, func(h cache.ResourceEventHandler) { h.OnDelete(oldObj) })
	d.each(after, func(h cache.ResourceEventHandler) { h.OnAdd(newObj, false) })
}

func (d *dispatcher) each(key string, f func(cache.ResourceEventHandler)) {
	if key == "" {
		return
	}
	d.mu.RLock()
	defer d.mu.RUnlock()
	for _, h := range d.handlers[key] {
		f(h.h)
	}
}

func (d *dispatcher) add(key string, h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	reg := &keyedHandler{h: h}
	// Under the write lock no event is dispatched, so the key's current
	// objects reach the handler before any later event about them.
	d.mu.Lock()
	defer d.mu.Unlock()
	objs, err := d.current(key)
	if err != nil {
		return nil, err
	}
	for _, obj := range objs {
		h.OnAdd(obj, true)
	}
	d.handlers[key] = append(d.handlers[key], reg)
	return registration{ResourceEventHandlerRegistration: d.reg, handler: reg}, nil
}

func (d *dispatcher) remove(key string, reg cache.ResourceEventHandlerRegistration) error {
	r, ok := reg.(registration)
	if !ok {
		return errors.New("not a registration of this informer view")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	hs := d.handlers[key]
	for j, h := range hs {
		if h == r.handler {
			d.handlers[key] = append(hs[:j:j], hs[j+1:]...)
			break
		}
	}
	if len(d.handlers[key]) == 0 {
		delete(d.handlers, key)
	}
	return nil
}

// registration is a dispatched handler's registration: synced once the
// shared handler has delivered the initial list (the objects already in
// the cache were handed over when the handler was added).
type registration struct {
	cache.ResourceEventHandlerRegistration // the shared handler's
	handler                                *keyedHandler
}

// keyedInformer is the shared informer (its store, indexer, sync state),
// but for its event handlers, which see only the objects of one key.
type keyedInformer struct {
	cache.SharedIndexInformer
	d   *dispatcher
	key string
}

func (i *keyedInformer) AddEventHandler(h cache.ResourceEventHandler) (cache.ResourceEventHandlerRegistration, error) {
	return i.d.add(i.key, h)
}

func (i *keyedInformer) AddEventHandlerWithResyncPeriod(h cache.ResourceEventHandler, _ time.Duration) (cache.ResourceEventHandlerRegistration, error) {
	return i.d.add(i.key, h)
}

func (i *keyedInformer) AddEventHandlerWithOptions(h cache.ResourceEventHandler, _ cache.HandlerOptions) (cache.ResourceEventHandlerRegistration, error) {
	return i.d.add(i.key, h)
}

func (i *keyedInformer) RemoveEventHandler(reg cache.ResourceEventHandlerRegistration) error {
	return i.d.remove(i.key, reg)
}

// allKey is the one key of a fan-out: every handler sees every object.
const allKey = "*"

// fanOut returns a view of inf whose event handlers all share one handler
// on inf (see dispatcher). Views are cheap; the dispatcher is made once per
// informer, on the first call.
func fanOut(inf cache.SharedIndexInformer) (cache.SharedIndexInformer, error) {
	d, err := newDispatcher(inf, func(any) string { return allKey }, func(string) ([]any, error) {
		return inf.GetStore().List(), nil
	})
	if err != nil {
		return nil, err
	}
	return &keyedInformer{SharedIndexInformer: inf, d: d, key: allKey}, nil
}
