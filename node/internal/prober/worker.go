package prober

import (
	"context"
	"fmt"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// worker runs one probe of one container, every periodSeconds, until the
// pod is done, deleted, or the container ended for good. Its fields past
// probe belong to its goroutine.
type worker struct {
	m         *Manager
	pp        *podProbes
	container *corev1.Container
	kind      Kind
	probe     *corev1.Probe

	// instance is the container run being probed; a new run starts the
	// counting over.
	instance string
	// last is the latest raw result and run how many times in a row it
	// came; onHold is set once a liveness or startup failure had the
	// container stopped, until its next run.
	last   Result
	run    int
	onHold bool
}

func (w *worker) loop() {
	defer w.m.wg.Done()
	t := w.m.cfg.Clock.NewTicker(periodOf(w.probe))
	defer t.Stop()
	for w.step(w.m.ctx) {
		select {
		case <-w.m.ctx.Done():
			return
		case <-w.pp.stopped:
			return
		case <-t.C():
		}
	}
}

// view is what a worker reads of its pod at a step.
type view struct {
	pod     *corev1.Pod
	cs      *corev1.ContainerStatus
	started bool // the container's startup probe passed for this run
	gated   bool // the container has a startup probe being run
	halted  bool
}

func (w *worker) view() view {
	w.m.mu.Lock()
	defer w.m.mu.Unlock()
	_, gated := w.pp.workers[probeKey{w.container.Name, Startup}]
	v := view{pod: w.pp.pod, halted: w.pp.halted, gated: gated}
	for _, list := range [][]corev1.ContainerStatus{w.pp.status.InitContainerStatuses, w.pp.status.ContainerStatuses} {
		for i := range list {
			if list[i].Name == w.container.Name {
				cs := list[i]
				v.cs = &cs
			}
		}
	}
	if v.cs != nil {
		v.started = w.pp.resultOf(probeKey{w.container.Name, Startup}, instanceOf(v.cs)) == Success
	}
	return v
}

// step probes once if it is time to, and reports whether the worker goes
// on: it stops when its pod is gone or the container has ended for good.
func (w *worker) step(ctx context.Context) bool {
	v := w.view()
	switch {
	case v.halted:
		return false
	case v.cs == nil:
		return true // not reported yet
	}
	run := v.cs.State.Running
	if run == nil {
		w.instance = ""
		term := v.cs.State.Terminated
		return term == nil || v.pod.Spec.RestartPolicy != corev1.RestartPolicyNever
	}
	if inst := instanceOf(v.cs); inst != w.instance {
		w.instance, w.last, w.run, w.onHold = inst, Unknown, 0, false
		w.set(v.pod, initial(w.kind))
	}
	if w.onHold {
		return true
	}
	switch {
	case w.kind == Startup && v.started:
		return true // done for this run
	case w.kind != Startup && v.gated && !v.started:
		return true // the startup probe holds the others back
	case w.probe.InitialDelaySeconds > 0 && w.m.cfg.Clock.Since(run.StartedAt.Time) < time.Duration(w.probe.InitialDelaySeconds)*time.Second:
		return true
	}

	out, err := w.m.run(ctx, v.pod, w.container, w.probe)
	if err != nil {
		// Not a failure of the container: the result is thrown away, as
		// the kubelet does.
		log.G(ctx).WithField("pod", v.pod.Namespace+"/"+v.pod.Name).WithField("container", w.container.Name).
			WithError(err).Debugf("%s probe could not be run", w.kind)
		return true
	}
	if out.result == w.last {
		w.run++
	} else {
		w.last, w.run = out.result, 1
	}
	if out.result == Failure && w.run < threshold(w.probe.FailureThreshold, 3) ||
		out.result == Success && w.run < threshold(w.probe.SuccessThreshold, 1) {
		return true
	}
	if changed := w.set(v.pod, out.result); changed && out.result == Failure {
		w.m.event(v.pod, corev1.EventTypeWarning, ReasonUnhealthy, fmt.Sprintf("%s probe failed: %s", w.kind, out.output))
	}
	if out.result == Failure && w.kind != Readiness {
		w.kill(ctx, v.pod)
	}
	return true
}

// kill stops the container whose liveness or startup probe failed, with the
// probe's grace period if it has one, else the pod's.
func (w *worker) kill(ctx context.Context, pod *corev1.Pod) {
	grace := int64(corev1.DefaultTerminationGracePeriodSeconds)
	if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	if w.probe.TerminationGracePeriodSeconds != nil {
		grace = *w.probe.TerminationGracePeriodSeconds
	}
	w.m.event(pod, corev1.EventTypeNormal, ReasonKilling,
		fmt.Sprintf("Container %s failed %s probe, will be restarted", w.container.Name, strings.ToLower(string(w.kind))))
	if err := w.m.cfg.Kill(ctx, pod, w.container.Name, time.Duration(grace)*time.Second); err != nil {
		log.G(ctx).WithField("pod", pod.Namespace+"/"+pod.Name).WithField("container", w.container.Name).
			WithError(err).Warn("stopping a container that failed its probe")
		w.run = 0 // counted again from scratch, then tried again
		return
	}
	w.onHold, w.run = true, 0
}

// set records the worker's result for its container run and tells the
// manager's Changed when it differs from the previous one.
func (w *worker) set(pod *corev1.Pod, r Result) (changed bool) {
	m := w.m
	key := probeKey{w.container.Name, w.kind}
	m.mu.Lock()
	prev := w.pp.resultOf(key, w.instance)
	w.pp.results[key] = instanceResult{instance: w.instance, result: r}
	status := w.pp.status
	halted := w.pp.halted
	m.mu.Unlock()
	if prev == r || halted {
		return false
	}
	if m.cfg.Changed != nil && w.kind != Liveness {
		m.cfg.Changed(pod, status)
	}
	return true
}

func (m *Manager) event(pod *corev1.Pod, eventType, reason, msg string) {
	if m.cfg.Event != nil {
		m.cfg.Event(pod, eventType, reason, msg)
	}
}

// threshold is a threshold field, or its default when unset (the API
// server sets the defaults, but a pod built in memory may not have them).
func threshold(v, def int32) int {
	if v < 1 {
		return int(def)
	}
	return int(v)
}

func periodOf(p *corev1.Probe) time.Duration {
	if p.PeriodSeconds < 1 {
		return 10 * time.Second
	}
	return max(time.Duration(p.PeriodSeconds)*time.Second, minPeriod)
}

func timeoutOf(p *corev1.Probe) time.Duration {
	return max(time.Duration(p.TimeoutSeconds)*time.Second, minTimeout)
}
