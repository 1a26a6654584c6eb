package mock

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/version"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/stage"
	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/usage"
)

// kwok's Stages (--stage-config) run the lifecycle of the pods that have
// no mock.vkubelet.io annotation, and the node's status (nodestages.go).
// A pod's stages see the pod as the controller gave it (metadata, spec)
// with the status the stages made; a stage's status patch is what the mock
// reports for the pod, its finalizers are patched and its Events recorded
// through the API server, and its delete ends a deletion (the pod's
// terminal status, after which the controller removes it) or, for a pod
// not being deleted, deletes it.

// ReasonStageFailed is the Warning Event's reason when a stage cannot be
// taken: its expression or template fails on the object, or the API server
// refused its change.
const ReasonStageFailed = "StageFailed"

// maxInstantStages bounds the stages a pod or node goes through without a
// delay, one after the other, before it waits for a change from outside:
// stages whose every status differs (a template writing Now) and that
// wait for nothing would otherwise run without end.
const maxInstantStages = 64

// apiTimeout bounds a stage's request to the API server.
const apiTimeout = 30 * time.Second

// stageEnv is what the stages of the node cfg describes see.
func stageEnv(cfg provider.InitConfig, started time.Time, podIPs func(namespace, name string) []string) stage.Env {
	return stage.Env{
		NodeName: cfg.NodeName, NodeIP: cfg.InternalIP, NodePort: cfg.DaemonPort,
		Version: version.Version, StartTime: started, PodIPs: podIPs,
		OtherKinds: usage.Kinds, // see usage.go
	}
}

// loadStages compiles the stage files for the node env describes.
func loadStages(cfg provider.InitConfig, env stage.Env) (*stage.Set, error) {
	if len(cfg.StageConfigs) == 0 {
		return nil, nil
	}
	return stage.Load(cfg.StageConfigs, env)
}

// stagedIPs are a pod's IPs, for the templates' PodIPWith.
func (p *Provider) stagedIPs(namespace, name string) []string {
	p.mu.Lock()
	defer p.mu.Unlock()
	if ps, ok := p.pods[podKey(namespace, name)]; ok {
		return ps.ips
	}
	return nil
}

// staged tells whether the stages run pod: there are pod stages and the
// pod has none of the mock's annotations, which win.
func (p *Provider) staged(pod *corev1.Pod) bool {
	return len(p.stages.Pods()) > 0 && !scripted(pod)
}

// scripted tells whether the pod has any of the mock's annotations, which
// win over kwok's objects.
func scripted(pod *corev1.Pod) bool {
	for k := range pod.Annotations {
		if strings.HasPrefix(k, faultPrefix) {
			return true
		}
	}
	return false
}

// stagedPod is what the stages keep of a pod they run. Its maps are
// replaced, never changed in place, so a stage reads them unlocked.
type stagedPod struct {
	// obj is the pod as the stages see it.
	obj    *stage.Object
	status corev1.PodStatus
	// next is the stage the pod waits for and timer its wait; gen counts
	// the stages chosen, so that one whose wait a change cut short does
	// nothing.
	next    *stage.Stage
	timer   stoppable
	gen     uint64
	instant int
}

// newStagedPod starts pod's stages from its status as the API server has
// it: the IPs the controller chose are not the pod's until a stage says.
func newStagedPod(pod *corev1.Pod) (*stagedPod, error) {
	pod = pod.DeepCopy()
	pod.ManagedFields = nil
	pod.Status.PodIP, pod.Status.PodIPs, pod.Status.HostIP, pod.Status.HostIPs = "", nil, "", nil
	if pod.Status.Phase == "" {
		pod.Status.Phase = corev1.PodPending
	}
	obj, err := objectOf(pod, pod.Labels, pod.Annotations)
	if err != nil {
		return nil, err
	}
	return &stagedPod{obj: obj, status: pod.Status}, nil
}

// objectOf is v as stages see it.
func objectOf(v any, labels, annotations map[string]string) (*stage.Object, error) {
	data, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return &stage.Object{JSON: m, Labels: labels, Annotations: annotations}, nil
}

// withMeta is obj with metadata fields set (a nil value removes one).
func withMeta(obj *stage.Object, fields map[string]any) *stage.Object {
	out := &stage.Object{JSON: make(map[string]any, len(obj.JSON)), Labels: obj.Labels, Annotations: obj.Annotations}
	for k, v := range obj.JSON {
		out.JSON[k] = v
	}
	meta := map[string]any{}
	if old, ok := obj.JSON["metadata"].(map[string]any); ok {
		for k, v := range old {
			meta[k] = v
		}
	}
	for k, v := range fields {
		if v == nil {
			delete(meta, k)
		} else {
			meta[k] = v
		}
	}
	out.JSON["metadata"] = meta
	return out
}

// jsonValue is v as encoding/json decodes it into an any; nil for nothing.
func jsonValue(v any) any {
	data, err := json.Marshal(v)
	if err != nil {
		return nil
	}
	var out any
	_ = json.Unmarshal(data, &out)
	return out
}

func (sp *stagedPod) finalizers() []string {
	meta, _ := sp.obj.JSON["metadata"].(map[string]any)
	list, _ := meta["finalizers"].([]any)
	out := make([]string, 0, len(list))
	for _, f := range list {
		if s, ok := f.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func (sp *stagedPod) deleting() bool {
	meta, _ := sp.obj.JSON["metadata"].(map[string]any)
	return meta["deletionTimestamp"] != nil
}

func (sp *stagedPod) stop() {
	if sp.timer != nil {
		sp.timer.Stop()
		sp.timer = nil
	}
	sp.next = nil
	sp.gen++
}

// setStatus makes status, a stage's, the pod's: its containers' states
// follow, for logs, exec and stats.
func (ps *podState) setStatus(status map[string]any) error {
	var st corev1.PodStatus
	if err := decodeInto(status, &st); err != nil {
		return err
	}
	// IDs the stage left out, as a runtime would report them.
	for _, list := range [][]corev1.ContainerStatus{st.InitContainerStatuses, st.ContainerStatuses} {
		for i := range list {
			s := &list[i]
			if s.ContainerID == "" && (s.State.Running != nil || s.State.Terminated != nil) {
				s.ContainerID = ps.containerID(s.Name)
			}
			if s.ImageID == "" && s.Image != "" {
				s.ImageID = imageID(s.Image)
			}
		}
	}
	sp := ps.staged
	next := &stage.Object{JSON: make(map[string]any, len(sp.obj.JSON)), Labels: sp.obj.Labels, Annotations: sp.obj.Annotations}
	for k, v := range sp.obj.JSON {
		next.JSON[k] = v
	}
	next.JSON["status"] = status
	sp.obj, sp.status = next, st
	for _, pair := range []struct {
		cs []*containerState
		ss []corev1.ContainerStatus
	}{{ps.init, st.InitContainerStatuses}, {ps.containers, st.ContainerStatuses}} {
		for _, c := range pair.cs {
			for _, s := range pair.ss {
				if s.Name == c.spec.name {
					c.follow(s, ps.now())
				}
			}
		}
	}
	// Its containers started once a stage ran one: the pod has stats.
	for _, c := range ps.containers {
		ps.started = ps.started || c.ran
	}
	return nil
}

// follow takes a stage's status of the container, and starts or ends its
// run as the status says.
func (c *containerState) follow(s corev1.ContainerStatus, now time.Time) {
	open := len(c.instances) > 0 && c.instances[len(c.instances)-1].end.IsZero()
	switch {
	case s.State.Running != nil && !open:
		start := s.State.Running.StartedAt.Time
		if start.IsZero() {
			start = now
		}
		c.addInstance(instance{start: start})
		c.ran = true
	case s.State.Terminated != nil:
		if !open {
			c.addInstance(instance{start: s.State.Terminated.StartedAt.Time})
		}
		end := s.State.Terminated.FinishedAt.Time
		if end.IsZero() {
			end = now
		}
		c.instances[len(c.instances)-1].end = end
		c.ran, c.done = true, true
	}
	c.status = *s.DeepCopy()
}

// scheduleStage chooses the pod's next stage and waits its delay; p.mu
// must be held. A deleted pod no stage takes is stopped at once.
func (p *Provider) scheduleStage(ps *podState) {
	sp := ps.staged
	st, err := p.stages.Pods().Match(sp.obj, p.rnd)
	if err != nil {
		p.stageFailed(ps, err)
		return
	}
	if st != nil && st == sp.next && sp.timer != nil {
		return // still the stage it waits for
	}
	sp.stop()
	if st == nil {
		if sp.deleting() {
			p.finishPod(p.ctx, ps)
		}
		return
	}
	d, err := st.Delay(sp.obj, time.Now(), p.rnd)
	if err != nil {
		p.stageFailed(ps, err)
		return
	}
	if d > 0 {
		sp.instant = 0
	} else if sp.instant++; sp.instant > maxInstantStages {
		p.stageFailed(ps, fmt.Errorf("stage %q: %d stages in a row without a delay: waiting for the pod to change", st.Name(), maxInstantStages))
		return
	}
	sp.next = st
	gen := sp.gen
	sp.timer = p.clock.AfterFunc(d, func() { p.runPodStage(ps, st, gen) })
}

// stageFailed records why the pod's stages stopped; p.mu must be held.
func (p *Provider) stageFailed(ps *podState, err error) {
	log.G(p.ctx).WithField("pod", podKey(ps.pod.namespace, ps.pod.name)).WithError(err).Warn("mock: pod stage")
	p.events.warn(ps.pod.namespace, ps.pod.name, ps.pod.uid, ReasonStageFailed, err.Error())
}

// runPodStage takes stage st's steps for the pod, if it is still the one
// the pod waits for (gen), then chooses the next.
func (p *Provider) runPodStage(ps *podState, st *stage.Stage, gen uint64) {
	p.mu.Lock()
	sp := ps.staged
	if ps.deleted || sp == nil || sp.gen != gen {
		p.mu.Unlock()
		return
	}
	sp.timer = nil
	ns, name, uid := ps.pod.namespace, ps.pod.name, ps.pod.uid
	p.mu.Unlock()

	current := func() bool { return !ps.deleted && ps.staged == sp && sp.gen == gen } // p.mu held
	fail := func(err error) {
		p.mu.Lock()
		defer p.mu.Unlock()
		if current() {
			p.stageFailed(ps, fmt.Errorf("stage %q: %w", st.Name(), err))
			sp.next = nil
		}
	}
	for _, step := range st.Steps() {
		switch {
		case step.Event != nil:
			p.events.record(&corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: ns, Name: name, UID: uid}, step.Event.Type, step.Event.Reason, step.Event.Message)
		case step.Finalizers != nil:
			p.mu.Lock()
			have := sp.finalizers()
			p.mu.Unlock()
			patch, err := step.Finalizers.JSONPatch(have)
			if err == nil && patch != nil {
				err = p.patchPodFinalizers(ps, sp, gen, ns, name, uid, patch)
			}
			if err != nil {
				fail(fmt.Errorf("finalizers: %w", err))
				return
			}
		case step.Delete:
			p.mu.Lock()
			if !current() {
				p.mu.Unlock()
				return
			}
			if sp.deleting() {
				p.finishPod(p.ctx, ps)
				p.mu.Unlock()
				return
			}
			p.mu.Unlock()
			ctx, cancel := context.WithTimeout(p.ctx, apiTimeout)
			err := p.kube.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0), Preconditions: &metav1.Preconditions{UID: &uid}})
			cancel()
			if err != nil {
				fail(fmt.Errorf("delete: %w", err))
			}
			return // DeletePod goes on
		case step.Patch != nil:
			p.mu.Lock()
			obj := sp.obj
			p.mu.Unlock()
			status, err := step.Patch.Apply(obj, stage.KindPod)
			p.mu.Lock()
			if current() {
				if err == nil {
					err = ps.setStatus(status)
				}
				if err == nil {
					p.changed(ps)
				}
			}
			p.mu.Unlock()
			if err != nil {
				fail(err)
				return
			}
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if current() {
		p.scheduleStage(ps)
	}
}

// patchPodFinalizers patches the pod's finalizers in the API server and
// takes those it then has.
func (p *Provider) patchPodFinalizers(ps *podState, sp *stagedPod, gen uint64, ns, name string, uid types.UID, patch []byte) error {
	if p.kube == nil {
		return fmt.Errorf("no API client (a plugin process) to patch them with")
	}
	ctx, cancel := context.WithTimeout(p.ctx, apiTimeout)
	defer cancel()
	pod, err := p.kube.CoreV1().Pods(ns).Patch(ctx, name, types.JSONPatchType, guardUID(uid, patch), metav1.PatchOptions{})
	if err != nil {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if !ps.deleted && ps.staged == sp && sp.gen == gen {
		var v any
		if len(pod.Finalizers) > 0 {
			v = jsonValue(pod.Finalizers)
		}
		sp.obj = withMeta(sp.obj, map[string]any{"finalizers": v})
	}
	return nil
}

// startStaged starts the stages of a pod CreatePod took; p.mu must be held.
func (p *Provider) startStaged(ps *podState, pod *corev1.Pod) error {
	sp, err := newStagedPod(pod)
	if err != nil {
		return err
	}
	ps.staged = sp
	p.scheduleStage(ps)
	return nil
}

// updateStaged takes the pod's new labels and annotations into its
// stages, which choose again; p.mu must be held.
func (p *Provider) updateStaged(ps *podState, pod *corev1.Pod) {
	sp := ps.staged
	sp.obj = withMeta(sp.obj, map[string]any{"labels": jsonValue(pod.Labels), "annotations": jsonValue(pod.Annotations)})
	sp.obj.Labels, sp.obj.Annotations = pod.Labels, pod.Annotations
	sp.instant = 0
	p.scheduleStage(ps)
}

// deleteStaged hands the deletion of a staged pod to its stages; p.mu must
// be held.
func (p *Provider) deleteStaged(ps *podState, pod *corev1.Pod) {
	sp := ps.staged
	at := pod.DeletionTimestamp
	if at == nil {
		at = ptr.To(metav1.Now()) // gone from the API server already
	}
	fields := map[string]any{"deletionTimestamp": jsonValue(at), "finalizers": nil}
	if len(pod.Finalizers) > 0 {
		fields["finalizers"] = jsonValue(pod.Finalizers)
	}
	if pod.DeletionGracePeriodSeconds != nil {
		fields["deletionGracePeriodSeconds"] = *pod.DeletionGracePeriodSeconds
	}
	if !sp.deleting() {
		sp.obj = withMeta(sp.obj, fields)
		sp.instant = 0
	}
	p.scheduleStage(ps)
}

// newRand is the stages' source of chance.
func newRand() *rand.Rand { return rand.New(rand.NewPCG(rand.Uint64(), rand.Uint64())) } //nolint:gosec // G404: stage weights and jitter, not secrets
