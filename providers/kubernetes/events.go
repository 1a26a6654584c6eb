package kubernetes

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"
	"unicode"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/scheme"
	typedcorev1 "k8s.io/client-go/kubernetes/typed/core/v1"
	"k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/record"
	watchtools "k8s.io/client-go/tools/watch"
	"k8s.io/client-go/util/flowcontrol"
	"k8s.io/client-go/util/workqueue"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// Bounds of what an Event of B carries into A. B's writers choose these
// strings: they are cut, and stripped of control characters, which would
// reach the terminals of A's users through kubectl describe.
const (
	// maxEventMessage is the longest message relayed, the limit of an
	// events.k8s.io note.
	maxEventMessage = 1024
	// maxEventReason is the longest reason relayed, events.k8s.io's limit.
	maxEventReason = 128
	// maxFieldPath is longer than any container's field path
	// (spec.ephemeralContainers{<63 characters>}).
	maxFieldPath = 128
)

// Retries of an Event naming a pod of this node that B's pod informer does
// not show yet (the two watches of B are not ordered): up to eventRetries
// times, from eventRetryDelay doubling, at most maxRetryingEvents at once.
const (
	eventRetries      = 5
	eventRetryDelay   = 200 * time.Millisecond
	maxRetryingEvents = 1000
)

// echoedReasons are reasons of B's Events that A records itself for the
// same occurrence: A's scheduler has recorded the pod's binding to the
// virtual node; B's names a node of B.
var echoedReasons = map[string]bool{"Scheduled": true}

// eventVerdict is what becomes of an Event of B.
type eventVerdict int

const (
	// eventRelayed: it is about a pod of this node, and goes to A's pod.
	eventRelayed eventVerdict = iota
	// eventNotAboutPod: its involvedObject is not a pod of its own
	// namespace.
	eventNotAboutPod
	// eventInvalid: its type is neither Normal nor Warning, or it has no
	// reason.
	eventInvalid
	// eventEcho: A records its reason itself (echoedReasons).
	eventEcho
	// eventNotOurs: no pod of this node in B has that name.
	eventNotOurs
	// eventPodNotYet: the name is one this node gives in B, but B's pod
	// informer does not show such a pod (yet).
	eventPodNotYet
	// eventUIDMismatch: this node's pod of that name has another UID: the
	// Event is forged, or about an older pod of the name.
	eventUIDMismatch
	// eventStale: it last happened before B's pod was made.
	eventStale
	// eventSourceGone: A's pod is gone, or is another pod now.
	eventSourceGone
)

var verdictNames = [...]string{"relayed", "not about a pod", "invalid", "echo", "not ours", "pod not yet in B's informer",
	"UID mismatch", "stale", "A's pod gone"}

// String names the verdict in logs.
func (v eventVerdict) String() string {
	if int(v) < len(verdictNames) {
		return verdictNames[v]
	}
	return fmt.Sprintf("eventVerdict(%d)", int(v))
}

// relayedEvent is an Event of B as it is recorded in A.
type relayedEvent struct {
	// ref is A's pod, with the container's fieldPath.
	ref                        corev1.ObjectReference
	eventType, reason, message string
}

// relayable maps an Event of B to the Event to record in A. It is relayed
// only when its involvedObject is a pod this node made in B, by the B
// pod's UID: the pod must be in B's pod informer under that namespace and
// name, carry this node's signature, and have the UID the Event names, and
// A's pod must still be the one the signature names. A writer in B can
// thus make Events appear only on A's pods this node offloaded, never on
// another object of A.
func (p *Provider) relayable(ev *corev1.Event) (relayedEvent, eventVerdict) {
	obj := ev.InvolvedObject
	if obj.Kind != "Pod" || (obj.APIVersion != "v1" && obj.APIVersion != "") || obj.Namespace != ev.Namespace || obj.UID == "" {
		return relayedEvent{}, eventNotAboutPod
	}
	if (ev.Type != corev1.EventTypeNormal && ev.Type != corev1.EventTypeWarning) || ev.Reason == "" {
		return relayedEvent{}, eventInvalid
	}
	if echoedReasons[ev.Reason] {
		return relayedEvent{}, eventEcho
	}
	item, exists, err := p.pods.GetIndexer().GetByKey(obj.Namespace + "/" + obj.Name)
	if err != nil || !exists {
		if strings.HasPrefix(obj.Name, p.names.nodePrefix()) {
			return relayedEvent{}, eventPodNotYet
		}
		return relayedEvent{}, eventNotOurs
	}
	remote := item.(*corev1.Pod)
	namespace, name, uid, ours := p.trust.sourceOf(remote)
	switch {
	case !ours:
		return relayedEvent{}, eventNotOurs
	case remote.UID != obj.UID:
		return relayedEvent{}, eventUIDMismatch
	case lastSeen(ev).Before(remote.CreationTimestamp.Time):
		return relayedEvent{}, eventStale
	}
	local, err := p.local.Pods.Pods(namespace).Get(name)
	if err != nil || local.UID != uid {
		return relayedEvent{}, eventSourceGone
	}
	return relayedEvent{
		ref: corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name, UID: uid,
			FieldPath: containerPath(local, obj.FieldPath)},
		eventType: ev.Type,
		reason:    bounded(ev.Reason, maxEventReason, false),
		message:   bounded(ev.Message, maxEventMessage, true),
	}, eventRelayed
}

// lastSeen is when the Event last happened, by whichever of its times its
// writer set (the events.k8s.io API sets eventTime and series).
func lastSeen(ev *corev1.Event) time.Time {
	switch {
	case ev.Series != nil && !ev.Series.LastObservedTime.IsZero():
		return ev.Series.LastObservedTime.Time
	case !ev.LastTimestamp.IsZero():
		return ev.LastTimestamp.Time
	case !ev.EventTime.IsZero():
		return ev.EventTime.Time
	case !ev.FirstTimestamp.IsZero():
		return ev.FirstTimestamp.Time
	}
	return ev.CreationTimestamp.Time
}

// containerPath is fieldPath when it names a container of A's pod as the
// kubelet does (spec.containers{app}), else "": the Event is then on the
// pod.
func containerPath(pod *corev1.Pod, fieldPath string) string {
	list, rest, ok := strings.Cut(fieldPath, "{")
	name, closed := strings.CutSuffix(rest, "}")
	if !ok || !closed {
		return ""
	}
	var names []string
	switch list {
	case "spec.containers":
		for _, c := range pod.Spec.Containers {
			names = append(names, c.Name)
		}
	case "spec.initContainers":
		for _, c := range pod.Spec.InitContainers {
			names = append(names, c.Name)
		}
	case "spec.ephemeralContainers":
		for _, c := range pod.Spec.EphemeralContainers {
			names = append(names, c.Name)
		}
	}
	if !slices.Contains(names, name) {
		return ""
	}
	return fieldPath
}

// bounded is s as valid UTF-8 without control characters (but newlines
// and tabs in a message), cut to max bytes and then marked "...".
func bounded(s string, max int, message bool) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) && !(message && (r == '\n' || r == '\t')) {
			return ' '
		}
		return r
	}, strings.ToValidUTF8(s, "\uFFFD"))
	if len(s) <= max {
		return s
	}
	return strings.ToValidUTF8(s[:max-len("...")], "") + "..."
}

// trimEvent keeps of an Event of B what relayable reads, its strings
// bounded, so a retried Event holds little memory whatever B's writer put
// in it.
func trimEvent(ev *corev1.Event) *corev1.Event {
	obj := ev.InvolvedObject
	return &corev1.Event{
		ObjectMeta: metav1.ObjectMeta{Namespace: ev.Namespace, Name: ev.Name, CreationTimestamp: ev.CreationTimestamp},
		InvolvedObject: corev1.ObjectReference{Kind: obj.Kind, APIVersion: obj.APIVersion, Namespace: obj.Namespace, Name: obj.Name, UID: obj.UID,
			FieldPath: bounded(obj.FieldPath, maxFieldPath, false)},
		Type:           bounded(ev.Type, maxEventReason, false),
		Reason:         bounded(ev.Reason, maxEventReason, false),
		Message:        bounded(ev.Message, maxEventMessage, true),
		FirstTimestamp: ev.FirstTimestamp,
		LastTimestamp:  ev.LastTimestamp,
		EventTime:      ev.EventTime,
		Series:         ev.Series,
	}
}

// eventRelay records on A's pods the Events B records about their pods in
// B: a watch of B's pod Events (no cache: many nodes sharing one namespace
// of B would each hold all of its Events), each mapped by relayable, then
// bounded by the node's rate and recorded through a recorder of its own,
// whose correlator de-duplicates and rate-limits per pod as the kubelet's
// does (25 at once, then one every 5 minutes).
type eventRelay struct {
	p        *Provider
	recorder record.EventRecorder
	limit    flowcontrol.RateLimiter
	// queue holds the Events to map; those waiting for their pod to
	// reach B's pod informer come back after a delay.
	queue workqueue.TypedRateLimitingInterface[*corev1.Event]
	// The worker's own: how many Events wait for a retry, and how many
	// were dropped over the node's rate since one was last relayed.
	retrying, dropped int
}

// newEventRelay relays to A through recorder, at the config's rate.
func newEventRelay(p *Provider, recorder record.EventRecorder) *eventRelay {
	qps, burst := p.cfg.eventRate()
	return &eventRelay{
		p:        p,
		recorder: recorder,
		limit:    flowcontrol.NewTokenBucketRateLimiter(qps, burst),
		queue: workqueue.NewTypedRateLimitingQueueWithConfig(
			workqueue.NewTypedItemExponentialFailureRateLimiter[*corev1.Event](eventRetryDelay, eventRetryDelay<<eventRetries),
			workqueue.TypedRateLimitingQueueConfig[*corev1.Event]{}),
	}
}

// podEventRecorder records on A's pods as the daemon does (its component
// and the node as the source), through a broadcaster of its own: B's
// Events spend their own per-pod budget of the correlator's spam filter,
// not that of the daemon's Events about the same pods. It stops with ctx.
func podEventRecorder(ctx context.Context, client kubernetes.Interface, nodeName string) record.EventRecorder {
	broadcaster := record.NewBroadcaster(record.WithContext(ctx))
	broadcaster.StartRecordingToSink(&typedcorev1.EventSinkImpl{Interface: client.CoreV1().Events("")})
	return broadcaster.NewRecorder(scheme.Scheme, corev1.EventSource{Component: "virtual-kubelet", Host: nodeName})
}

// eventSelector selects B's Events about pods.
var eventSelector = fields.OneTermEqualSelector("involvedObject.kind", "Pod").String()

// run watches B's Events from now on until ctx ends; the Events B recorded
// before are not relayed (a restarted daemon has relayed them, or they
// happened while none ran). When B's watch history no longer reaches the
// last Event seen (a long outage), it starts again from then.
func (r *eventRelay) run(ctx context.Context) {
	defer r.queue.ShutDown()
	go r.work(ctx)
	events := r.p.remote.CoreV1().Events(r.p.cfg.Namespace) // "" is all namespaces
	for ctx.Err() == nil {
		err := r.watch(ctx, events)
		if ctx.Err() != nil {
			return
		}
		log.G(ctx).WithError(err).Warn("kubernetes: watching the remote cluster's Events: starting again from now")
		select {
		case <-ctx.Done():
		case <-time.After(5 * time.Second):
		}
	}
}

// watch queues B's Events from its current resource version on, until the
// watch can no longer resume.
func (r *eventRelay) watch(ctx context.Context, events typedcorev1.EventInterface) error {
	list, err := events.List(ctx, metav1.ListOptions{FieldSelector: eventSelector, Limit: 1})
	if err != nil {
		return err
	}
	w, err := watchtools.NewRetryWatcherWithContext(ctx, list.ResourceVersion, &cache.ListWatch{
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			o.FieldSelector = eventSelector
			return events.Watch(ctx, o)
		},
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	for e := range w.ResultChan() {
		switch e.Type {
		case watch.Added, watch.Modified:
			if ev, ok := e.Object.(*corev1.Event); ok {
				r.queue.Add(trimEvent(ev))
			}
		case watch.Error:
			return fmt.Errorf("the watch ended: %v", e.Object)
		}
	}
	return fmt.Errorf("the watch ended")
}

// work maps and relays the queued Events, one at a time.
func (r *eventRelay) work(ctx context.Context) {
	for {
		ev, shutdown := r.queue.Get()
		if shutdown {
			return
		}
		r.handle(ctx, ev)
		r.queue.Done(ev)
	}
}

// handle relays one Event, or queues it again while its pod may be on its
// way to B's pod informer.
func (r *eventRelay) handle(ctx context.Context, ev *corev1.Event) {
	retried := r.queue.NumRequeues(ev) > 0
	out, verdict := r.p.relayable(ev)
	if verdict == eventPodNotYet && r.queue.NumRequeues(ev) < eventRetries && (retried || r.retrying < maxRetryingEvents) {
		if !retried {
			r.retrying++
		}
		r.queue.AddRateLimited(ev)
		return
	}
	if retried {
		r.retrying--
	}
	r.queue.Forget(ev)
	logger := log.G(ctx).WithField("event", ev.Namespace+"/"+ev.Name)
	if verdict != eventRelayed {
		logger.WithField("verdict", verdict).Debug("kubernetes: an Event of the remote cluster is not relayed")
		return
	}
	if !r.limit.TryAccept() {
		if r.dropped++; r.dropped == 1 {
			logger.Warn("kubernetes: the remote cluster's Events exceed the node's rate (the provider config's events): dropping them until it allows more")
		}
		return
	}
	if r.dropped > 0 {
		logger.WithField("dropped", r.dropped).Info("kubernetes: relaying the remote cluster's Events again")
		r.dropped = 0
	}
	r.recorder.Event(&out.ref, out.eventType, out.reason, out.message)
}
