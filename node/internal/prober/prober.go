// Package prober evaluates pods' probes as a kubelet does, for providers
// that do not run them: one worker per container and probe, ticking every
// periodSeconds, counting results against successThreshold and
// failureThreshold. The results become the containers' ready and started
// (Overlay), and a failed liveness or startup probe stops the container
// through the provider, whose restart policy then decides whether it runs
// again.
package prober

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/vkubelet/virtual-kubelet/node/internal/perpod"
)

// Kind is what a probe decides: a container's readiness, its liveness, or
// whether it has started.
type Kind string

// The kinds of probe, worded as the kubelet's Events word them.
const (
	Readiness Kind = "Readiness"
	Liveness  Kind = "Liveness"
	Startup   Kind = "Startup"
)

// Result is a probe's latest decided result.
type Result int8

// The results. A result stands until the opposite one has been seen
// successThreshold (failureThreshold) times in a row.
const (
	Unknown Result = iota
	Success
	Failure
)

// initial is a probe's result before it has decided anything, as on a
// kubelet: a container is not ready until its readiness probe passes, is
// alive until its liveness probe fails, and has not started until its
// startup probe passes.
func initial(k Kind) Result {
	switch k {
	case Readiness:
		return Failure
	case Liveness:
		return Success
	}
	return Unknown
}

// Bounds on a probe's timing fields, whatever the pod says: a pod author
// cannot have the node probe more often than once a second per probe.
const (
	minPeriod  = time.Second
	minTimeout = time.Second
)

// Reasons of the Events the prober records, the kubelet's where it has one.
const (
	ReasonUnhealthy        = "Unhealthy"
	ReasonKilling          = "Killing"
	ReasonProbeUnsupported = "ProbeUnsupported"
)

// Config is what the prober needs from the node.
type Config struct {
	// Clock drives the workers' tickers and initialDelaySeconds.
	Clock clock.WithTicker
	// Exec runs exec probes; nil declares them unsupported.
	Exec ExecFunc
	// PodNetwork says the pods' IPs are reachable from this process, so
	// HTTP, TCP and gRPC probes can be run; otherwise they are unsupported.
	PodNetwork bool
	// Kill stops a container whose liveness or startup probe failed, with
	// grace; nil declares those probes unsupported, as nothing could act on
	// their failure.
	Kill func(ctx context.Context, pod *corev1.Pod, container string, grace time.Duration) error
	// Changed is called, from a worker, when a result changes what Overlay
	// makes of the pod's status; status is the provider's latest status
	// given to Observe.
	Changed func(pod *corev1.Pod, status corev1.PodStatus)
	// Event records an Event on the pod.
	Event func(pod *corev1.Pod, eventType, reason, message string)
	// UserAgent is sent by HTTP probes (the kubelet's is kube-probe/X.Y).
	UserAgent string
}

// Manager runs the workers of every pod it is shown. It is safe for
// concurrent use.
type Manager struct {
	cfg  Config
	http *http.Client
	ctx  context.Context
	stop context.CancelFunc
	wg   sync.WaitGroup

	mu   sync.Mutex
	pods map[string]*podProbes
}

// podProbes is what the manager keeps of one pod.
type podProbes struct {
	pod *corev1.Pod
	// status is the provider's latest status of the pod.
	status corev1.PodStatus
	// workers are the probes being run, by container and kind; a probe
	// that cannot be run has none.
	workers map[probeKey]*worker
	results map[probeKey]instanceResult
	// seen holds the probes already looked at, run or declared unsupported.
	seen map[probeKey]bool
	// stopped is closed when the pod's workers are to end.
	stopped chan struct{}
	halted  bool
}

type probeKey struct {
	container string
	kind      Kind
}

// instanceResult is a result of one run of a container: a restarted
// container starts over from the initial result.
type instanceResult struct {
	instance string
	result   Result
}

// New returns a manager; Stop ends its workers.
func New(cfg Config) *Manager {
	ctx, stop := context.WithCancel(context.Background())
	if cfg.UserAgent == "" {
		cfg.UserAgent = "kube-probe"
	}
	return &Manager{cfg: cfg, http: probeClient(), ctx: ctx, stop: stop, pods: map[string]*podProbes{}}
}

// Stop ends every worker and waits for them.
func (m *Manager) Stop() {
	// Under the lock, so no Observe starts a worker after it.
	m.mu.Lock()
	m.stop()
	m.mu.Unlock()
	m.wg.Wait()
}

// Observe takes the provider's latest status of pod: the workers of its
// probes are started (once; probes are immutable) or, once the pod is
// being deleted or done, stopped. It returns status with each probed
// container's ready and started as the probes decided.
func (m *Manager) Observe(pod *corev1.Pod, status corev1.PodStatus) corev1.PodStatus {
	key := pod.Namespace + "/" + pod.Name
	m.mu.Lock()
	defer m.mu.Unlock()
	pp := m.pods[key]
	if pp != nil && pp.pod.UID != pod.UID {
		pp.halt()
		delete(m.pods, key)
		pp = nil
	}
	if status.Phase == corev1.PodSucceeded || status.Phase == corev1.PodFailed {
		if pp != nil {
			pp.halt()
			delete(m.pods, key)
		}
		return status
	}
	if pp == nil {
		// A pod first seen deleting gets no worker, and keeps no entry
		// that its end, told already, would not drop.
		if !hasProbes(pod) || pod.DeletionTimestamp != nil {
			return status
		}
		pp = &podProbes{workers: map[probeKey]*worker{}, results: map[probeKey]instanceResult{},
			seen: map[probeKey]bool{}, stopped: make(chan struct{})}
		m.pods[key] = pp
	}
	pp.pod, pp.status = pod, status
	if pod.DeletionTimestamp != nil {
		// A stopping container is not killed for its liveness; its last
		// readiness stands until it ends.
		pp.halt()
	} else if m.ctx.Err() == nil {
		m.startWorkers(pp)
	}
	return pp.overlay(status)
}

// Forget stops the workers of the pod of key and drops its results.
func (m *Manager) Forget(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if pp := m.pods[key]; pp != nil {
		pp.halt()
		delete(m.pods, key)
	}
}

// PodEnded stops the workers of the pod of key and drops its results,
// whichever way it ended.
func (m *Manager) PodEnded(key string, _ perpod.End) { m.Forget(key) }

// Len is the number of pods whose probes are kept.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.pods)
}

func (pp *podProbes) halt() {
	if !pp.halted {
		pp.halted = true
		close(pp.stopped)
	}
}

// probed are the containers whose probes a kubelet runs: the app containers
// and the sidecars (init containers that keep running).
func probed(pod *corev1.Pod) []*corev1.Container {
	var out []*corev1.Container
	for i := range pod.Spec.InitContainers {
		c := &pod.Spec.InitContainers[i]
		if c.RestartPolicy != nil && *c.RestartPolicy == corev1.ContainerRestartPolicyAlways {
			out = append(out, c)
		}
	}
	for i := range pod.Spec.Containers {
		out = append(out, &pod.Spec.Containers[i])
	}
	return out
}

func probeOf(c *corev1.Container, k Kind) *corev1.Probe {
	switch k {
	case Readiness:
		return c.ReadinessProbe
	case Liveness:
		return c.LivenessProbe
	}
	return c.StartupProbe
}

func hasProbes(pod *corev1.Pod) bool {
	for _, c := range probed(pod) {
		if c.ReadinessProbe != nil || c.LivenessProbe != nil || c.StartupProbe != nil {
			return true
		}
	}
	return false
}

// startWorkers starts a worker for each probe of pp's pod not looked at yet,
// and records one Event for the probes that cannot be run. m.mu is held.
func (m *Manager) startWorkers(pp *podProbes) {
	var unsupported []string
	for _, c := range probed(pp.pod) {
		for _, k := range []Kind{Startup, Readiness, Liveness} {
			p := probeOf(c, k)
			key := probeKey{c.Name, k}
			if p == nil || pp.seen[key] {
				continue
			}
			pp.seen[key] = true
			why := m.unsupported(p)
			if why == "" && k != Readiness && m.cfg.Kill == nil {
				why = "the provider cannot restart a single container"
			}
			if why != "" {
				unsupported = append(unsupported, fmt.Sprintf("%s probe of container %q: %s", strings.ToLower(string(k)), c.Name, why))
				continue
			}
			w := &worker{m: m, pp: pp, container: c, kind: k, probe: p}
			pp.workers[key] = w
			m.wg.Add(1)
			go w.loop()
		}
	}
	if len(unsupported) > 0 && m.cfg.Event != nil {
		m.cfg.Event(pp.pod, corev1.EventTypeWarning, ReasonProbeUnsupported,
			"Probes not run on this node, their results ignored: "+strings.Join(unsupported, "; "))
	}
}

// instanceOf names one run of a container, so results of an earlier run
// are not taken for this one's; "" when it is not running.
func instanceOf(cs *corev1.ContainerStatus) string {
	if cs.State.Running == nil {
		return ""
	}
	return fmt.Sprintf("%s|%d|%d", cs.ContainerID, cs.RestartCount, cs.State.Running.StartedAt.Unix())
}

// resultOf is the result of the probe of key for the container run
// instance. m.mu is held.
func (pp *podProbes) resultOf(key probeKey, instance string) Result {
	if r, ok := pp.results[key]; ok && r.instance == instance && instance != "" {
		return r.result
	}
	return initial(key.kind)
}

// overlay returns status with ready and started set from the probes' results
// for each container with a probe being run, as the kubelet sets them: a
// container with a startup probe has started once it passed; one with a
// readiness probe is ready once started and passing; a container not
// running is neither. Other containers keep what the provider said.
func (pp *podProbes) overlay(status corev1.PodStatus) corev1.PodStatus {
	out := *status.DeepCopy()
	for _, list := range [][]corev1.ContainerStatus{out.InitContainerStatuses, out.ContainerStatuses} {
		for i := range list {
			cs := &list[i]
			inst := instanceOf(cs)
			_, hasStartup := pp.workers[probeKey{cs.Name, Startup}]
			_, hasReadiness := pp.workers[probeKey{cs.Name, Readiness}]
			started := cs.Started != nil && *cs.Started
			if hasStartup {
				started = inst != "" && pp.resultOf(probeKey{cs.Name, Startup}, inst) == Success
				cs.Started = &started
			}
			switch {
			case hasReadiness:
				cs.Ready = inst != "" && started && pp.resultOf(probeKey{cs.Name, Readiness}, inst) == Success
			case hasStartup:
				cs.Ready = cs.Ready && started
			}
		}
	}
	return out
}
