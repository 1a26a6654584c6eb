package mock

import (
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

// podState is a pod as the mock runs it. Every method expects the
// provider's lock to be held; timers take it before calling in.
type podState struct {
	p       *Provider
	pod     *podInfo
	ip      string
	created time.Time
	// started is set once the containers have been started (after the
	// scripted start delay).
	started    bool
	startTimer stoppable
	init       []corev1.ContainerStatus
	containers []*containerState
	deleted    bool
}

// containerState is one container's runtime state.
type containerState struct {
	spec   containerSpec
	script script
	status corev1.ContainerStatus
	// ran is set once the container has run (or tried to) at least once.
	ran bool
	// done is set when it has stopped and will not restart.
	done  bool
	timer stoppable
	// instances are the start and end of each run, for logs and stats; the
	// last one has a zero end while the container runs.
	instances []instance
}

type instance struct{ start, end time.Time }

func newPodState(p *Provider, pod *corev1.Pod, scripts []script, ip string) *podState {
	ps := &podState{p: p, pod: infoOf(pod), ip: ip, created: p.clock.Now()}
	for i, c := range pod.Spec.Containers {
		ps.containers = append(ps.containers, &containerState{
			spec:   specOf(c),
			script: scripts[i],
			status: corev1.ContainerStatus{
				Name:    c.Name,
				Image:   c.Image,
				ImageID: "mock://" + c.Image,
				Started: ptr.To(false),
				State:   corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}},
			},
		})
	}
	return ps
}

func (ps *podState) container(name string) *containerState {
	for _, c := range ps.containers {
		if c.spec.name == name {
			return c
		}
	}
	return nil
}

// begin starts the containers now or after the scripted start delay.
func (ps *podState) begin() {
	delay := time.Duration(0)
	if v, ok := ps.pod.annotations[AnnotationStartDelay]; ok {
		// parseScript validated it.
		delay, _ = time.ParseDuration(v)
	}
	if delay == 0 {
		ps.start()
		return
	}
	ps.startTimer = ps.after(delay, ps.start)
}

// after runs f after d under the provider's lock and reports the change,
// unless the pod has been deleted meanwhile.
func (ps *podState) after(d time.Duration, f func()) stoppable {
	return ps.p.clock.AfterFunc(d, func() {
		ps.p.mu.Lock()
		defer ps.p.mu.Unlock()
		if ps.deleted {
			return
		}
		f()
		ps.p.changed(ps)
	})
}

func (ps *podState) start() {
	now := metav1.NewTime(ps.p.clock.Now())
	// Init containers complete at once.
	for _, c := range ps.pod.init {
		ps.init = append(ps.init, corev1.ContainerStatus{
			Name: c.name, Image: c.image, ImageID: "mock://" + c.image,
			ContainerID: ps.containerID(c.name), Started: ptr.To(false),
			State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: now, FinishedAt: now, ContainerID: ps.containerID(c.name),
			}},
		})
	}
	ps.started = true
	for _, c := range ps.containers {
		ps.run(c)
	}
}

func (ps *podState) containerID(name string) string {
	return fmt.Sprintf("mock://%s/%s", ps.pod.uid, name)
}

// run starts one instance of the container.
func (ps *podState) run(c *containerState) {
	now := ps.p.clock.Now()
	c.ran = true
	c.status.ContainerID = ps.containerID(c.spec.name)
	if c.script.failStart != "" {
		c.instances = append(c.instances, instance{start: now, end: now})
		ps.terminated(c, exitCodeStartError, "StartError", c.script.failStart, now)
		return
	}
	c.instances = append(c.instances, instance{start: now})
	c.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
	c.status.Ready, c.status.Started = true, ptr.To(true)
	if c.script.runFor > 0 {
		c.timer = ps.after(c.script.runFor, func() { ps.exit(c, c.script.exitCode) })
	}
}

// exit ends the running instance with code.
func (ps *podState) exit(c *containerState, code int32) {
	now := ps.p.clock.Now()
	c.instances[len(c.instances)-1].end = now
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	ps.terminated(c, code, reason, "", now)
}

// terminated records the container's end and restarts it if the pod's
// restartPolicy says so.
func (ps *podState) terminated(c *containerState, code int32, reason, msg string, now time.Time) {
	started := metav1.NewTime(c.instances[len(c.instances)-1].start)
	term := &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, Message: msg,
		StartedAt: started, FinishedAt: metav1.NewTime(now), ContainerID: c.status.ContainerID,
	}
	c.status.State = corev1.ContainerState{Terminated: term}
	c.status.Ready, c.status.Started = false, ptr.To(false)

	restart := false
	switch ps.pod.restartPolicy {
	case corev1.RestartPolicyNever:
	case corev1.RestartPolicyOnFailure:
		restart = code != 0
	default: // Always, and the API's default
		restart = true
	}
	if !restart || ps.deleted {
		c.done = true
		return
	}
	c.status.LastTerminationState = corev1.ContainerState{Terminated: term}
	c.status.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s", c.script.restartDelay, c.spec.name, ps.pod.name, ps.pod.namespace),
	}}
	c.timer = ps.after(c.script.restartDelay, func() {
		c.status.RestartCount++
		ps.run(c)
	})
}

// update takes a new spec: containers whose image changed restart with it.
// It reports whether the status changed.
func (ps *podState) update(pod *corev1.Pod) bool {
	ps.pod.labels, ps.pod.annotations = pod.Labels, pod.Annotations
	changed := false
	for _, spec := range pod.Spec.Containers {
		c := ps.container(spec.Name)
		if c == nil || c.spec.image == spec.Image {
			continue
		}
		c.spec, c.status.Image, c.status.ImageID = specOf(spec), spec.Image, "mock://"+spec.Image
		if c.status.State.Running != nil {
			c.stopTimer()
			c.instances[len(c.instances)-1].end = ps.p.clock.Now()
			c.status.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
				ExitCode: 0, Reason: "Completed", StartedAt: c.status.State.Running.StartedAt,
				FinishedAt: metav1.NewTime(ps.p.clock.Now()), ContainerID: c.status.ContainerID,
			}}
			c.status.RestartCount++
			ps.run(c)
		}
		changed = true
	}
	return changed
}

// kill stops every container, as a graceful deletion does: running ones
// exit 0, ones waiting to restart keep their last exit.
func (ps *podState) kill() {
	ps.stopTimers()
	ps.deleted = true
	now := ps.p.clock.Now()
	if !ps.started {
		ps.started = true
		for _, c := range ps.containers {
			c.instances = append(c.instances, instance{start: now, end: now})
		}
	}
	for _, c := range ps.containers {
		switch {
		case c.status.State.Running != nil:
			ps.exit(c, 0)
		case c.status.State.Waiting != nil:
			last := c.status.LastTerminationState.Terminated
			if last == nil {
				last = &corev1.ContainerStateTerminated{Reason: "ContainerCannotRun", Message: "pod deleted before the container started"}
			}
			c.status.State = corev1.ContainerState{Terminated: last.DeepCopy()}
			c.done = true
		}
	}
}

func (ps *podState) stopTimers() {
	if ps.startTimer != nil {
		ps.startTimer.Stop()
	}
	for _, c := range ps.containers {
		c.stopTimer()
	}
}

func (c *containerState) stopTimer() {
	if c.timer != nil {
		c.timer.Stop()
		c.timer = nil
	}
}

// phase follows the kubelet's rules: Pending until every container has
// started once, Succeeded or Failed once all have stopped for good, Running
// in between.
func (ps *podState) phase() corev1.PodPhase {
	if !ps.started {
		return corev1.PodPending
	}
	allDone, allZero := true, true
	for _, c := range ps.containers {
		if !c.ran {
			return corev1.PodPending
		}
		if !c.done {
			allDone = false
		} else if t := c.status.State.Terminated; t != nil && t.ExitCode != 0 {
			allZero = false
		}
	}
	switch {
	case !allDone:
		return corev1.PodRunning
	case allZero:
		return corev1.PodSucceeded
	}
	return corev1.PodFailed
}

// snapshot is the pod with its current status, as far as the mock keeps it.
// It shares maps and slices with the state: callers copy it.
func (ps *podState) snapshot() *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ps.pod.namespace, Name: ps.pod.name, UID: ps.pod.uid,
			Labels: ps.pod.labels, Annotations: ps.pod.annotations, CreationTimestamp: ps.pod.created,
		},
		Spec:   corev1.PodSpec{NodeName: ps.pod.nodeName, RestartPolicy: ps.pod.restartPolicy},
		Status: ps.status(),
	}
	for _, c := range ps.pod.init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c.container())
	}
	for _, c := range ps.containers {
		pod.Spec.Containers = append(pod.Spec.Containers, c.spec.container())
	}
	return pod
}

// notification is what NotifyPods gets: the pod's identity and status, all
// the controller reads; a simulation of thousands of pods keeps one per pod.
func (ps *podState) notification() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ps.pod.namespace, Name: ps.pod.name, UID: ps.pod.uid},
		Status:     ps.status(),
	}
}

// status is the pod's current status.
func (ps *podState) status() corev1.PodStatus {
	phase := ps.phase()
	ready := corev1.ConditionTrue
	statuses := make([]corev1.ContainerStatus, len(ps.containers))
	for i, c := range ps.containers {
		statuses[i] = *c.status.DeepCopy()
		if !c.status.Ready {
			ready = corev1.ConditionFalse
		}
	}
	boolCond := func(b bool) corev1.ConditionStatus {
		if b {
			return corev1.ConditionTrue
		}
		return corev1.ConditionFalse
	}
	created := metav1.NewTime(ps.created)
	status := corev1.PodStatus{
		Phase:                 phase,
		HostIP:                ps.p.internalIP,
		InitContainerStatuses: append([]corev1.ContainerStatus(nil), ps.init...),
		ContainerStatuses:     statuses,
		StartTime:             &created,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReadyToStartContainers, Status: boolCond(ps.started), LastTransitionTime: created},
			{Type: corev1.PodInitialized, Status: boolCond(ps.started), LastTransitionTime: created},
			{Type: corev1.ContainersReady, Status: ready, LastTransitionTime: created},
			{Type: corev1.PodReady, Status: ready, LastTransitionTime: created},
		},
	}
	if ps.p.internalIP != "" {
		status.HostIPs = []corev1.HostIP{{IP: ps.p.internalIP}}
	}
	if ps.started {
		status.PodIP, status.PodIPs = ps.ip, []corev1.PodIP{{IP: ps.ip}}
	}
	return status
}
