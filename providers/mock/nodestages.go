package mock

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/stage"
)

// The node's stages see the Node as the API server has it (labels and
// annotations others set included) with the status the mock reports; a
// status patch is what the mock reports next, through NotifyNodeStatus,
// on the Node being registered (SimulateFrom). With node stages the node
// reports status.phase Running, as kwok's nodes do and its stages expect.

// nodeStages runs the node's stages; nil without node stages (and
// without --watch-stages, which may bring some).
type nodeStages struct {
	name string
	kube kubernetes.Interface
	// nodes and lister are the process's watch of its Nodes and its
	// cache, when it has several nodes; otherwise the node watches its
	// own.
	nodes    node.NodeWatch
	lister   corev1listers.NodeLister
	events   podEvents
	capacity corev1.ResourceList
	since    time.Time

	mu sync.Mutex
	// registered is the Node being registered, the base of those
	// reported.
	registered *corev1.Node
	// stages are the node's stages; restaged tells run they changed.
	stages   stage.Lifecycle
	restaged chan struct{}
}

func newNodeStages(p *Provider, cfg provider.InitConfig) *nodeStages {
	if len(p.stages.Nodes()) == 0 && !cfg.WatchStages {
		return nil
	}
	return &nodeStages{name: cfg.NodeName, stages: p.stages.Nodes(), restaged: make(chan struct{}, 1), kube: cfg.KubeClient, nodes: cfg.NodeWatch, lister: cfg.NodeLister, events: p.events, capacity: p.capacity, since: p.startedAt}
}

// restage makes l the node's stages.
func (ns *nodeStages) restage(l stage.Lifecycle) {
	ns.mu.Lock()
	ns.stages = l
	ns.mu.Unlock()
	select {
	case ns.restaged <- struct{}{}:
	default:
	}
}

// current are the node's stages.
func (ns *nodeStages) current() stage.Lifecycle {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	return ns.stages
}

// Ping implements node.NodeProvider: the mock's backend is this process.
func (p *Provider) Ping(ctx context.Context) error { return ctx.Err() }

// SimulateFrom implements node.NodeStatusSimulator.
func (p *Provider) SimulateFrom(registered *corev1.Node) {
	if ns := p.nodeStages; ns != nil {
		ns.mu.Lock()
		defer ns.mu.Unlock()
		ns.registered = registered.DeepCopy()
	}
}

// NotifyNodeStatus implements node.NodeProvider: with node stages, cb gets
// the node each time a stage changes its status, until ctx ends.
func (p *Provider) NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node)) {
	if ns := p.nodeStages; ns != nil {
		go ns.run(ctx, cb)
	}
}

// follow hands offer the node's Node as the API server has it, and nil
// once it is deleted, until the returned func is called: through the
// process's watch of its Nodes when it has one, else by a watch of its own.
func (ns *nodeStages) follow(ctx context.Context, offer func(*corev1.Node)) (stop func(), err error) {
	if ns.nodes != nil {
		// Subscribed first, then read: a change in between is offered
		// after the cache's copy, and offer keeps the newest.
		stop = ns.nodes.Subscribe(ns.name, offer)
		if n, err := ns.lister.Get(ns.name); err == nil {
			offer(n)
		}
		return stop, nil
	}
	factory := informers.NewSharedInformerFactoryWithOptions(ns.kube, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.FieldSelector = "metadata.name=" + ns.name
	}))
	informer := factory.Core().V1().Nodes().Informer()
	if _, err := informer.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { offer(obj.(*corev1.Node)) },
		UpdateFunc: func(_, obj any) { offer(obj.(*corev1.Node)) },
		DeleteFunc: func(any) { offer(nil) },
	}); err != nil {
		return nil, err
	}
	factory.Start(ctx.Done())
	return factory.Shutdown, nil
}

// base is the node reported: the one being registered, else one made of
// what the mock knows.
func (ns *nodeStages) base() *corev1.Node {
	ns.mu.Lock()
	defer ns.mu.Unlock()
	if ns.registered != nil {
		return ns.registered.DeepCopy()
	}
	return &corev1.Node{
		ObjectMeta: metav1.ObjectMeta{Name: ns.name},
		Status: corev1.NodeStatus{
			Capacity: ns.capacity.DeepCopy(), Allocatable: ns.capacity.DeepCopy(),
			Conditions: provider.HealthyConditions(ns.since, "mock provider"),
		},
	}
}

// run reports the node Running, then follows its Node in the API server
// and takes the stages that match it, until ctx ends.
func (ns *nodeStages) run(ctx context.Context, cb func(*corev1.Node)) {
	ctx = log.WithLogger(ctx, log.G(ctx).WithField("node", ns.name))
	base := ns.base()
	status := base.Status.DeepCopy()
	status.Phase = corev1.NodeRunning
	report := func() {
		n := base.DeepCopy()
		n.Status = *status.DeepCopy()
		cb(n)
	}
	report()
	if ns.kube == nil {
		log.G(ctx).Warn("mock: node stages need an API client: they do not run in a plugin process")
		return
	}

	updates := make(chan *corev1.Node, 1)
	offer := func(n *corev1.Node) {
		for {
			select {
			case updates <- n:
				return
			default:
			}
			select {
			case <-updates:
			default:
			}
		}
	}
	stopFollowing, err := ns.follow(ctx, offer)
	if err != nil {
		log.G(ctx).WithError(err).Error("mock: watching the node for its stages")
		return
	}
	defer stopFollowing()

	rnd := rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) //nolint:gosec // G404: stage weights and jitter, not secrets
	var (
		api     *corev1.Node
		next    *stage.Stage
		timer   *time.Timer
		due     <-chan time.Time
		instant int
	)
	stop := func() {
		if timer != nil {
			timer.Stop()
		}
		timer, due, next = nil, nil, nil
	}
	defer stop()
	object := func() (*stage.Object, error) {
		n := api.DeepCopy()
		n.ManagedFields = nil
		n.Status = *status.DeepCopy()
		return objectOf(n, n.Labels, n.Annotations)
	}
	fail := func(err error) {
		log.G(ctx).WithError(err).Warn("mock: node stage")
		if api != nil {
			ns.events.record(ns.ref(api), corev1.EventTypeWarning, ReasonStageFailed, err.Error())
		}
	}
	schedule := func() {
		if api == nil {
			stop()
			return
		}
		obj, err := object()
		if err != nil {
			fail(err)
			return
		}
		st, err := ns.current().Match(obj, rnd)
		if err != nil {
			fail(err)
			return
		}
		if st != nil && st == next && timer != nil {
			return
		}
		stop()
		if st == nil {
			return
		}
		d, err := st.Delay(obj, time.Now(), rnd)
		if err != nil {
			fail(err)
			return
		}
		if d > 0 {
			instant = 0
		} else if instant++; instant > maxInstantStages {
			fail(fmt.Errorf("stage %q: %d stages in a row without a delay: waiting for the node to change", st.Name(), maxInstantStages))
			return
		}
		next, timer = st, time.NewTimer(d)
		due = timer.C
	}
	// take runs st's steps.
	take := func(st *stage.Stage) {
		for _, step := range st.Steps() {
			switch {
			case step.Event != nil:
				ns.events.record(ns.ref(api), step.Event.Type, step.Event.Reason, step.Event.Message)
			case step.Finalizers != nil:
				patch, err := step.Finalizers.JSONPatch(api.Finalizers)
				if err == nil && patch != nil {
					api, err = ns.patchFinalizers(ctx, api.UID, patch)
				}
				if err != nil {
					fail(fmt.Errorf("stage %q: finalizers: %w", st.Name(), err))
					return
				}
			case step.Delete:
				rctx, cancel := context.WithTimeout(ctx, apiTimeout)
				err := ns.kube.CoreV1().Nodes().Delete(rctx, ns.name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &api.UID}})
				cancel()
				if err != nil {
					fail(fmt.Errorf("stage %q: delete: %w", st.Name(), err))
					return
				}
				log.G(ctx).Infof("mock: stage %s deleted the node", st.Name())
				api = nil // until the informer sees it again
				return
			case step.Patch != nil:
				obj, err := object()
				var got map[string]any
				if err == nil {
					got, err = step.Patch.Apply(obj, stage.KindNode)
				}
				var next corev1.NodeStatus
				if err == nil {
					err = decodeInto(got, &next)
				}
				if err != nil {
					fail(fmt.Errorf("stage %q: %w", st.Name(), err))
					return
				}
				status = &next
				report()
			}
		}
	}
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-updates:
			api = n
			instant = 0
			schedule()
		case <-ns.restaged:
			schedule()
		case <-due:
			st := next
			timer, due, next = nil, nil, nil
			take(st)
			schedule()
		}
	}
}

// ref names the node in Events.
func (ns *nodeStages) ref(api *corev1.Node) *corev1.ObjectReference {
	return &corev1.ObjectReference{Kind: "Node", APIVersion: "v1", Name: ns.name, UID: api.UID}
}

// patchFinalizers patches the Node's finalizers (it if is still the one of
// uid) and returns it as patched.
func (ns *nodeStages) patchFinalizers(ctx context.Context, uid types.UID, patch []byte) (*corev1.Node, error) {
	ctx, cancel := context.WithTimeout(ctx, apiTimeout)
	defer cancel()
	return ns.kube.CoreV1().Nodes().Patch(ctx, ns.name, types.JSONPatchType, guardUID(uid, patch), metav1.PatchOptions{})
}

// guardUID makes a JSON patch fail, rather than change another object of
// the same name, unless the object's UID is uid.
func guardUID(uid types.UID, patch []byte) []byte {
	return append([]byte(fmt.Sprintf(`[{"op":"test","path":"/metadata/uid","value":%q},`, uid)), patch[1:]...)
}

// decodeInto decodes a stage's status, JSON as an any, into out.
func decodeInto(status map[string]any, out any) error {
	data, err := json.Marshal(status)
	if err == nil {
		err = json.Unmarshal(data, out)
	}
	if err != nil {
		return fmt.Errorf("the status is not a %T: %v", out, err)
	}
	return nil
}
