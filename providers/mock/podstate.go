package mock

import (
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/intern"
)

// podState is a pod as the mock runs it. Every method expects the
// provider's lock to be held; timers take it before calling in.
type podState struct {
	p   *Provider
	pod *podInfo
	// ips are the pod's IPs, primary first.
	ips     []string
	created time.Time
	// started is set once the containers have been started (after the
	// scripted start delay).
	started    bool
	startTimer stoppable
	// resizeTimer applies a resize in progress (AnnotationResizeDelay).
	resizeTimer stoppable
	// resources are the pod-level resources the pod runs with (nil when
	// it has none), resizeTo those a resize in progress gives it.
	resources, resizeTo *corev1.ResourceRequirements
	// init are the init containers, run in order; initPos is the one
	// running (len(init) once all have completed or, sidecars, started).
	init       []*containerState
	initPos    int
	containers []*containerState
	// devices are the pod's devices (DRA), nil without any.
	devices *node.PodDevices
	// ephemeral are the containers kubectl debug added; they run once.
	ephemeral []*containerState
	deleted   bool
	// staged, when the stages run the pod, is what they keep of it; its
	// status is theirs.
	staged *stagedPod
	// at is the time of the transition being made (see during); zero
	// between transitions.
	at time.Time
	// usageObj is the pod as usage expressions see it; nil unless usage
	// objects give its containers' usage (see usage.go).
	usageObj map[string]any
}

// containerState is one container's runtime state.
type containerState struct {
	spec   containerSpec
	script script
	status corev1.ContainerStatus
	// ran is set once the container has run (or tried to) at least once.
	ran bool
	// done is set when it has stopped and will not restart.
	done bool
	// ephemeral is set on containers kubectl debug added.
	ephemeral bool
	// resizeTo are the resources a resize in progress gives the container.
	resizeTo *corev1.ResourceRequirements
	// fs holds the files copied into the container; nil until the first
	// exec, as most containers never have one.
	fs    *containerFS
	timer stoppable
	// instances are the start and end of the last keptInstances runs, for
	// logs and stats; the last one has a zero end while the container runs.
	instances []instance
	// runs counts the container's runs, forgotten ones included.
	runs int
	// forgottenCPU is the CPU time, in core-nanoseconds, of the runs
	// instances no longer holds.
	forgottenCPU uint64
	// backOffs is how many times the current back-off has doubled.
	backOffs int
	// meter is the usage the usage objects give it; nil without (see
	// usage.go).
	meter *usageMeter
}

// keptInstances is how many runs of a container the mock remembers: the
// current one and the previous one (kubectl logs --previous), as the
// kubelet keeps one last termination, so a crash loop costs no memory.
const keptInstances = 2

// Restart back-off, as the kubelet's CrashLoopBackOff: the scripted delay
// doubles with each restart up to MaxRestartBackOff, and starts over after
// a run of backOffReset, so a container that crashes at once settles at
// one restart, and one status change, every five minutes.
const (
	// MaxRestartBackOff is the longest back-off before a restart.
	MaxRestartBackOff = 5 * time.Minute
	backOffReset      = 2 * MaxRestartBackOff
)

type instance struct{ start, end time.Time }

func newPodState(p *Provider, pod *corev1.Pod, scripts podScripts, ips []string) *podState {
	ps := &podState{p: p, pod: infoOf(p.interner, pod), ips: ips, created: p.clock.Now(), resources: pod.Spec.Resources.DeepCopy()}
	p.interner.Requirements(ps.resources)
	// Containers wait to be created; with init containers, the later ones
	// wait for the pod's initialisation.
	waiting := "ContainerCreating"
	for i, c := range pod.Spec.InitContainers {
		ps.init = append(ps.init, newContainerState(p.interner, c, scripts.init[i], waiting))
		waiting = "PodInitializing"
	}
	for i, c := range pod.Spec.Containers {
		ps.containers = append(ps.containers, newContainerState(p.interner, c, scripts.containers[i], waiting))
	}
	ps.addEphemeral(pod) // a pod the mock restores may have some
	p.attachUsage(ps, pod)
	return ps
}

func newContainerState(in *intern.Interner, c corev1.Container, s script, waiting string) *containerState {
	// The status shares the spec's resource lists: the mock replaces
	// them on a resize and never changes them in place, and statuses
	// hands out copies.
	spec := specOf(in, c)
	resources := spec.resources
	return &containerState{
		spec:   spec,
		script: s,
		status: corev1.ContainerStatus{
			Name:      c.Name,
			Image:     c.Image,
			ImageID:   imageID(c.Image),
			Started:   ptr.To(false),
			Resources: &resources,
			State:     corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: waiting}},
			// The signal the mock's stop of the container sends, as a
			// runtime reports its effective one.
			StopSignal: stopSignalOf(c),
		},
	}
}

// stopSignalOf is the container's lifecycle.stopSignal, nil when unset
// (the mock then stops it as a runtime does by default, with SIGTERM).
func stopSignalOf(c corev1.Container) *corev1.Signal {
	if c.Lifecycle == nil || c.Lifecycle.StopSignal == nil {
		return nil
	}
	return ptr.To(*c.Lifecycle.StopSignal)
}

// imageID is the image ID the mock reports for image.
func imageID(image string) string { return intern.String("mock://" + image) }

// container finds an app or init container by name.
func (ps *podState) container(name string) *containerState {
	for _, list := range [][]*containerState{ps.containers, ps.init, ps.ephemeral} {
		for _, c := range list {
			if c.spec.name == name {
				return c
			}
		}
	}
	return nil
}

// all returns the app and init containers.
func (ps *podState) all() []*containerState {
	all := make([]*containerState, 0, len(ps.containers)+len(ps.init)+len(ps.ephemeral))
	return append(append(append(all, ps.containers...), ps.init...), ps.ephemeral...)
}

// isSidecar reports whether an init container keeps running alongside the
// app containers (restartPolicy: Always).
func (c *containerState) isSidecar() bool {
	return c.spec.restartPolicy != nil && *c.spec.restartPolicy == corev1.ContainerRestartPolicyAlways
}

// begin starts the containers now or after the scripted start delay.
func (ps *podState) begin() {
	ps.during(ps.created, func() {
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
	})
}

// during makes the transition f at t: every time f stamps is t. A timer's
// transition is made at the time it was set for, not the moment it fires,
// so that a pod replayed from the state directory (by another replica, or
// after a restart) reports the same times as the pod that ran.
func (ps *podState) during(t time.Time, f func()) {
	prev := ps.at
	ps.at = t
	defer func() { ps.at = prev }()
	f()
}

// now is the time of the transition being made, else the clock's.
func (ps *podState) now() time.Time {
	if !ps.at.IsZero() {
		return ps.at
	}
	return ps.p.clock.Now()
}

// after runs f after d under the provider's lock and reports the change,
// unless the pod has been deleted meanwhile.
func (ps *podState) after(d time.Duration, f func()) stoppable {
	at := ps.now().Add(d)
	return ps.p.clock.AfterFunc(d, func() {
		ps.p.mu.Lock()
		defer ps.p.mu.Unlock()
		if ps.deleted {
			return
		}
		ps.during(at, f)
		ps.p.changed(ps)
	})
}

// start runs the init containers in order, then the app containers.
func (ps *podState) start() {
	ps.started = true
	ps.initPos = -1
	ps.nextInit()
}

// nextInit moves on to the next init container, or the app containers
// once every init container has completed (sidecars: started).
func (ps *podState) nextInit() {
	ps.initPos++
	if ps.initPos < len(ps.init) {
		ps.run(ps.init[ps.initPos])
		return
	}
	for _, c := range ps.containers {
		ps.run(c)
	}
	for _, c := range ps.ephemeral {
		ps.run(c) // added while the pod was being created
	}
}

// isInit reports whether c is one of the pod's (non-sidecar) init containers.
func (ps *podState) isInit(c *containerState) bool {
	for _, ic := range ps.init {
		if ic == c {
			return !c.isSidecar()
		}
	}
	return false
}

func (ps *podState) containerID(name string) string {
	return fmt.Sprintf("mock://%s/%s", ps.pod.uid, name)
}

// fieldPath is the container's path in the pod spec, as the kubelet's
// Events about a container name it.
func (ps *podState) fieldPath(c *containerState) string {
	list := "containers"
	switch {
	case c.ephemeral:
		list = "ephemeralContainers"
	case slices.Contains(ps.init, c):
		list = "initContainers"
	}
	return "spec." + list + "{" + c.spec.name + "}"
}

// run starts one instance of the container.
func (ps *podState) run(c *containerState) {
	now := ps.now()
	c.ran = true
	c.status.ContainerID = ps.containerID(c.spec.name)
	if c.script.failStart != "" {
		c.addInstance(instance{start: now, end: now})
		ps.terminated(c, exitCodeStartError, "StartError", c.script.failStart, now)
		ps.p.events.warnOn(ps.pod.namespace, ps.pod.name, ps.pod.uid, ps.fieldPath(c), ReasonFailed, "Error: "+c.script.failStart)
		return
	}
	c.addInstance(instance{start: now})
	c.status.State = corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(now)}}
	c.status.Ready, c.status.Started = true, ptr.To(true)
	init := ps.isInit(c)
	if init || c.ephemeral {
		c.status.Ready = false // init and ephemeral containers are never ready
	}
	switch {
	case c.script.runFor > 0:
		c.timer = ps.after(c.script.runFor, func() { ps.exit(c, c.script.exitCode) })
	case init:
		// An unscripted init container completes at once.
		ps.exit(c, c.script.exitCode)
		return
	}
	if c.isSidecar() && ps.initPos < len(ps.init) && ps.init[ps.initPos] == c {
		ps.nextInit()
	}
}

// exit ends the running instance with code.
func (ps *podState) exit(c *containerState, code int32) {
	now := ps.now()
	c.instances[len(c.instances)-1].end = now
	reason := "Completed"
	if code != 0 {
		reason = "Error"
	}
	ps.terminated(c, code, reason, "", now)
}

// terminated records the container's end and restarts it if its restart
// rules, or the pod's restartPolicy, say so.
func (ps *podState) terminated(c *containerState, code int32, reason, msg string, now time.Time) {
	started := metav1.NewTime(c.instances[len(c.instances)-1].start)
	term := &corev1.ContainerStateTerminated{
		ExitCode: code, Reason: reason, Message: msg,
		StartedAt: started, FinishedAt: metav1.NewTime(now), ContainerID: c.status.ContainerID,
	}
	c.status.State = corev1.ContainerState{Terminated: term}
	c.status.Ready, c.status.Started = false, ptr.To(false)

	init := ps.isInit(c)
	restart := false
	switch {
	case c.isSidecar():
		restart = !ps.appsDone()
	case c.ephemeral:
		// Ephemeral containers are never restarted.
	case init && code == 0:
		// Init containers that succeeded are done, whatever the policy.
	default:
		// As the kubelet: the container's restart rules and policy, else
		// the pod's.
		policy := corev1.Container{RestartPolicy: c.spec.restartPolicy, RestartPolicyRules: c.spec.restartRules}
		restart = node.ContainerRestarts(&policy, &corev1.PodSpec{RestartPolicy: ps.pod.restartPolicy}, code)
	}
	if !restart || ps.deleted {
		c.done = true
		switch {
		case init && code == 0 && !ps.deleted:
			ps.nextInit()
		case !init && !c.isSidecar() && ps.appsDone():
			ps.stopSidecars()
		}
		return
	}
	c.status.LastTerminationState = corev1.ContainerState{Terminated: term}
	delay := c.backOff(now)
	c.status.State = corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{
		Reason:  "CrashLoopBackOff",
		Message: fmt.Sprintf("back-off %s restarting failed container=%s pod=%s_%s", delay, c.spec.name, ps.pod.name, ps.pod.namespace),
	}}
	c.timer = ps.after(delay, func() {
		c.status.RestartCount++
		ps.run(c)
	})
}

// backOff is the wait before restarting the container whose run ended now.
func (c *containerState) backOff(now time.Time) time.Duration {
	if now.Sub(c.instances[len(c.instances)-1].start) >= backOffReset {
		c.backOffs = 0
	}
	delay := c.script.restartDelay << c.backOffs
	switch {
	case c.script.restartDelay >= MaxRestartBackOff:
		return c.script.restartDelay // scripted longer: kept as written
	case delay >= MaxRestartBackOff:
		return MaxRestartBackOff
	}
	c.backOffs++
	return delay
}

// addInstance starts a run, forgetting the oldest one kept.
func (c *containerState) addInstance(in instance) {
	if len(c.instances) == keptInstances {
		c.forgottenCPU += c.instanceCPU(0, c.instances[0].end)
		c.instances = append(c.instances[:0], c.instances[1:]...)
	}
	c.rollUsage()
	c.instances = append(c.instances, in)
	c.runs++
}

// addEphemeral starts the ephemeral containers the pod's spec gained (the
// API server only ever adds them). It reports whether there were any.
func (ps *podState) addEphemeral(pod *corev1.Pod) bool {
	added := false
	for _, ec := range pod.Spec.EphemeralContainers {
		if ps.container(ec.Name) != nil {
			continue
		}
		c := newContainerState(ps.p.interner, corev1.Container(ec.EphemeralContainerCommon), script{restartDelay: time.Second, logInterval: time.Second}, "ContainerCreating")
		c.ephemeral = true
		ps.ephemeral = append(ps.ephemeral, c)
		if ps.started {
			ps.run(c)
		}
		added = true
	}
	return added
}

// appsDone reports whether every app container has stopped for good.
func (ps *podState) appsDone() bool {
	for _, c := range ps.containers {
		if !c.done {
			return false
		}
	}
	return true
}

// stopSidecars ends the sidecars once the app containers are done, as the
// kubelet does.
func (ps *podState) stopSidecars() {
	for _, c := range ps.init {
		if c.isSidecar() && !c.done {
			c.stopTimer()
			if c.status.State.Running != nil {
				ps.exit(c, 0)
			} else {
				c.done = true
			}
		}
	}
}

// update takes a new spec: containers whose image changed restart with it;
// new resources are applied (see updateResources). It reports whether the
// status changed.
func (ps *podState) update(pod *corev1.Pod) bool {
	ps.pod.labels, ps.pod.annotations = ps.p.interner.StringMap(pod.Labels), ps.p.interner.StringMap(pod.Annotations)
	changed := ps.addEphemeral(pod)
	for _, spec := range pod.Spec.Containers {
		c := ps.container(spec.Name)
		if c == nil || c.spec.image == spec.Image {
			continue
		}
		c.spec, c.status.Image, c.status.ImageID = specOf(ps.p.interner, spec), spec.Image, imageID(spec.Image)
		ps.restart(c)
		changed = true
	}
	return ps.updateResources(pod) || changed
}

// restart ends a running container's run as a clean stop and starts it
// again, its restart counted, to take a new spec.
func (ps *podState) restart(c *containerState) {
	if c.status.State.Running == nil {
		return
	}
	c.stopTimer()
	c.instances[len(c.instances)-1].end = ps.now()
	c.status.LastTerminationState = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{
		ExitCode: 0, Reason: "Completed", StartedAt: c.status.State.Running.StartedAt,
		FinishedAt: metav1.NewTime(ps.now()), ContainerID: c.status.ContainerID,
	}}
	c.status.RestartCount++
	ps.run(c)
}

// kill stops every container, as a graceful deletion does: running ones
// exit 0, ones waiting to restart keep their last exit.
func (ps *podState) kill() {
	ps.stopTimers()
	ps.deleted = true
	now := ps.now()
	ps.started, ps.initPos = true, len(ps.init)
	for _, c := range ps.all() {
		if !c.ran {
			c.addInstance(instance{start: now, end: now})
		}
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
	for _, t := range []stoppable{ps.startTimer, ps.resizeTimer} {
		if t != nil {
			t.Stop()
		}
	}
	for _, c := range ps.all() {
		c.stopTimer()
	}
	if ps.staged != nil {
		ps.staged.stop()
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
	for _, c := range ps.init {
		if t := c.status.State.Terminated; c.done && !c.isSidecar() && t != nil && t.ExitCode != 0 {
			return corev1.PodFailed // an init container failed for good
		}
	}
	if ps.initPos < len(ps.init) {
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

// snapshot is the pod with its current status, as far as the mock keeps it:
// a new object each time, whose maps and slices are the state's. The mock
// replaces those and never changes them in place, so a snapshot stays as it
// was taken; like every pod a provider returns, it is read-only.
func (ps *podState) snapshot() *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Namespace: ps.pod.namespace, Name: ps.pod.name, UID: ps.pod.uid,
			Labels: ps.pod.labels, Annotations: ps.pod.annotations, CreationTimestamp: ps.pod.created,
		},
		Spec:   corev1.PodSpec{NodeName: ps.pod.nodeName, RestartPolicy: ps.pod.restartPolicy, Resources: ps.resources},
		Status: ps.status(),
	}
	for _, c := range ps.init {
		pod.Spec.InitContainers = append(pod.Spec.InitContainers, c.spec.container())
	}
	for _, c := range ps.containers {
		pod.Spec.Containers = append(pod.Spec.Containers, c.spec.container())
	}
	for _, c := range ps.ephemeral {
		pod.Spec.EphemeralContainers = append(pod.Spec.EphemeralContainers, corev1.EphemeralContainer{
			EphemeralContainerCommon: corev1.EphemeralContainerCommon(c.spec.container())})
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
	if ps.staged != nil {
		return *ps.staged.status.DeepCopy()
	}
	created := metav1.NewTime(ps.created)
	// The conditions (Initialized, Ready, ...) are left to the pod
	// controller, which derives them from these statuses as a kubelet does.
	status := corev1.PodStatus{
		Phase:                 ps.phase(),
		HostIP:                ps.p.InternalIP,
		InitContainerStatuses: statuses(ps.init),
		ContainerStatuses:     statuses(ps.containers),
		// Like the kubelet, no readiness for ephemeral containers.
		EphemeralContainerStatuses: statuses(ps.ephemeral),
		StartTime:                  &created,
		Resources:                  ps.resources.DeepCopy(),
	}
	ps.deviceHealth(&status)
	if ps.p.InternalIP != "" {
		status.HostIPs = []corev1.HostIP{{IP: ps.p.InternalIP}}
	}
	if ps.started && len(ps.ips) > 0 {
		status.PodIP = ps.ips[0]
		for _, ip := range ps.ips {
			status.PodIPs = append(status.PodIPs, corev1.PodIP{IP: ip})
		}
	}
	return status
}

func statuses(cs []*containerState) []corev1.ContainerStatus {
	if len(cs) == 0 {
		return nil
	}
	out := make([]corev1.ContainerStatus, len(cs))
	for i, c := range cs {
		out[i] = *c.status.DeepCopy()
	}
	return out
}
