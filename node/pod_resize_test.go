package node

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func resources(cpuReq, cpuLim, mem string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuReq), corev1.ResourceMemory: resource.MustParse(mem)},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(cpuLim), corev1.ResourceMemory: resource.MustParse(mem)},
	}
}

// sizedPod is a running pod of generation gen whose container c has r.
func sizedPod(gen int64, r corev1.ResourceRequirements) *corev1.Pod {
	pod := testPod("u1", podRunning)
	pod.Generation = gen
	pod.Spec.Containers = []corev1.Container{{Name: "c", Image: "i", Resources: r, ResizePolicy: []corev1.ContainerResizePolicy{
		{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
		{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
	}}}
	return pod
}

func TestResizeChangesAndRestarts(t *testing.T) {
	old := resources("100m", "200m", "64Mi")
	for _, tc := range []struct {
		name        string
		to          corev1.ResourceRequirements
		wantChanges int
		wantRestart bool
	}{
		{name: "same resources", to: old},
		{name: "same quantities written otherwise", to: resources("0.1", "0.2", "64Mi")},
		{name: "CPU, NotRequired", to: resources("150m", "300m", "64Mi"), wantChanges: 1},
		{name: "memory, RestartContainer", to: resources("100m", "200m", "128Mi"), wantChanges: 1, wantRestart: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			changes := allocationOf(sizedPod(1, old)).changes(sizedPod(2, tc.to))
			if len(changes) != tc.wantChanges {
				t.Fatalf("changes = %+v, want %d", changes, tc.wantChanges)
			}
			if len(changes) == 1 && changes[0].Restart != tc.wantRestart {
				t.Errorf("Restart = %v, want %v", changes[0].Restart, tc.wantRestart)
			}
		})
	}
}

func TestResizeStateAfterOutcome(t *testing.T) {
	deferred := ResizeResult{Outcome: ResizeDeferred, Message: "later"}
	for _, tc := range []struct {
		name   string
		before resizeState
		result ResizeResult
		want   resizeState
	}{
		{name: "done clears everything", before: resizeState{pending: &resizePending{outcome: ResizeDeferred}, inProgress: 2}, result: ResizeResult{Outcome: ResizeDone}},
		{name: "in progress", result: ResizeResult{Outcome: ResizeInProgress}, want: resizeState{inProgress: 3}},
		{name: "in progress keeps the first generation", before: resizeState{inProgress: 2}, result: ResizeResult{Outcome: ResizeInProgress}, want: resizeState{inProgress: 2}},
		{name: "deferred, an earlier resize still in progress", before: resizeState{inProgress: 2}, result: deferred,
			want: resizeState{pending: &resizePending{outcome: ResizeDeferred, message: "later", generation: 3}, inProgress: 2}},
		{name: "infeasible", result: ResizeResult{Outcome: ResizeInfeasible, Message: "never"},
			want: resizeState{pending: &resizePending{outcome: ResizeInfeasible, message: "never", generation: 3}}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.before.after(tc.result, 3)
			if got.inProgress != tc.want.inProgress || (got.pending == nil) != (tc.want.pending == nil) || got.pending != nil && *got.pending != *tc.want.pending {
				t.Errorf("after = %+v (pending %+v), want %+v (pending %+v)", got, got.pending, tc.want, tc.want.pending)
			}
		})
	}
	if !(resizeState{pending: &resizePending{outcome: ResizeInfeasible, generation: 3}}).infeasible(3) {
		t.Error("an infeasible resize is proposed again for the same generation")
	}
	if (resizeState{pending: &resizePending{outcome: ResizeInfeasible, generation: 3}}).infeasible(4) {
		t.Error("a new resize of a pod whose last one was infeasible is not proposed")
	}
	if checkResult(ResizeResult{}) == nil {
		t.Error("a result without an outcome is accepted")
	}
}

func TestAllocationFromStatusAfterRestart(t *testing.T) {
	pod := sizedPod(2, resources("150m", "300m", "64Mi"))
	running := resources("100m", "200m", "64Mi")
	pod.Status.ContainerStatuses = []corev1.ContainerStatus{{Name: "c", AllocatedResources: running.Requests, Resources: &running}}
	if got, _ := allocationFromStatus(pod).of("c"); !apiequality.Semantic.DeepEqual(got, running) {
		t.Errorf("allocation = %v, want the reported %v", got, running)
	}
	pod.Status.ContainerStatuses[0].AllocatedResources = nil // written before resize support
	if got, _ := allocationFromStatus(pod).of("c"); !apiequality.Semantic.DeepEqual(got, pod.Spec.Containers[0].Resources) {
		t.Errorf("allocation = %v, want the spec's", got)
	}
}

// resizerProvider answers ResizePod as told and records what UpdatePod got.
type resizerProvider struct {
	nopProvider
	result  ResizeResult
	err     error
	resized []ResizeRequest
}

func (p *resizerProvider) ResizePod(_ context.Context, req ResizeRequest) (ResizeResult, error) {
	p.resized = append(p.resized, req)
	return p.result, p.err
}

// undeclaredResizer has ResizePod but, a CapabilityDeclarer, does not
// declare it (a plugin without CAPABILITY_RESIZE).
type undeclaredResizer struct{ resizerProvider }

func (*undeclaredResizer) Declares(Capability) bool { return false }

func TestResizeDecisions(t *testing.T) {
	old, updated := resources("100m", "200m", "64Mi"), resources("150m", "300m", "64Mi")
	for _, tc := range []struct {
		name      string
		provider  PodLifecycleHandler
		wantAlloc corev1.ResourceRequirements
		wantState resizeState
		wantErr   bool
	}{
		{name: "no PodResizer: UpdatePod applies it", provider: nopProvider{}, wantAlloc: updated},
		{name: "PodResizer not declared: UpdatePod applies it", provider: &undeclaredResizer{resizerProvider{result: ResizeResult{Outcome: ResizeInfeasible}}}, wantAlloc: updated},
		{name: "done", provider: &resizerProvider{result: ResizeResult{Outcome: ResizeDone}}, wantAlloc: updated},
		{name: "in progress", provider: &resizerProvider{result: ResizeResult{Outcome: ResizeInProgress}}, wantAlloc: updated, wantState: resizeState{inProgress: 2}},
		{name: "deferred", provider: &resizerProvider{result: ResizeResult{Outcome: ResizeDeferred, Message: "m"}}, wantAlloc: old,
			wantState: resizeState{pending: &resizePending{outcome: ResizeDeferred, message: "m", generation: 2}}},
		{name: "infeasible", provider: &resizerProvider{result: ResizeResult{Outcome: ResizeInfeasible, Message: "m"}}, wantAlloc: old,
			wantState: resizeState{pending: &resizePending{outcome: ResizeInfeasible, message: "m", generation: 2}}},
		{name: "provider fails", provider: &resizerProvider{err: errors.New("backend down")}, wantAlloc: old, wantErr: true},
		{name: "provider answers no outcome", provider: &resizerProvider{}, wantAlloc: old, wantErr: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pc := newTestController(t, tc.provider)
			rec := pc.pods.get("ns/p")
			rec.allocated("u1", allocationOf(sizedPod(1, old)), 1)
			pod := sizedPod(2, updated)
			given, err := pc.allocate(context.Background(), actionUpdate, pod, pod, rec)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error %v", err, tc.wantErr)
			}
			st := rec.view()
			if got, _ := st.allocationOf("u1").of("c"); !apiequality.Semantic.DeepEqual(got, tc.wantAlloc) {
				t.Errorf("allocation = %v, want %v", got, tc.wantAlloc)
			}
			if err == nil && !apiequality.Semantic.DeepEqual(given.Spec.Containers[0].Resources, tc.wantAlloc) {
				t.Errorf("the provider is given %v, want the allocation %v", given.Spec.Containers[0].Resources, tc.wantAlloc)
			}
			rs := st.resizeOf("u1")
			if rs.inProgress != tc.wantState.inProgress || (rs.pending == nil) != (tc.wantState.pending == nil) || rs.pending != nil && *rs.pending != *tc.wantState.pending {
				t.Errorf("state = %+v (pending %+v), want %+v", rs, rs.pending, tc.wantState)
			}
			if r, ok := tc.provider.(*resizerProvider); ok && len(r.resized) == 1 {
				if ch := r.resized[0].Containers; len(ch) != 1 || ch[0].Name != "c" || ch[0].Restart {
					t.Errorf("ResizePod got %+v, want c's CPU resized without a restart", ch)
				}
			}
			// An infeasible resize is not proposed again for the same spec.
			if r, ok := tc.provider.(*resizerProvider); ok && rs.pending != nil && rs.pending.outcome == ResizeInfeasible {
				if _, err := pc.allocate(context.Background(), actionUpdate, pod, pod, rec); err != nil || len(r.resized) != 1 {
					t.Errorf("infeasible resize proposed again: %d calls, %v", len(r.resized), err)
				}
			}
		})
	}
}

func TestResizeStatus(t *testing.T) {
	old, updated := resources("100m", "200m", "64Mi"), resources("150m", "300m", "64Mi")
	pc := newTestController(t, nopProvider{})
	rec := pc.pods.get("ns/p")
	pod := sizedPod(2, updated)
	rec.handedOver(pod)
	rec.resized("u1", allocationOf(pod), ResizeResult{Outcome: ResizeInProgress}, 2)
	current := &corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", Resources: &old}}}
	reported := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{Name: "c", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}}}

	// The provider says nothing of its resources yet: what it ran with
	// still shows, and the resize is in progress.
	s, settled := withResizeStatus(pod, rec.view(), reported, current, true)
	cs := s.ContainerStatuses[0]
	if !apiequality.Semantic.DeepEqual(*cs.Resources, old) || !apiequality.Semantic.DeepEqual(cs.AllocatedResources, updated.Requests) {
		t.Errorf("resources %v allocated %v, want %v and %v", cs.Resources, cs.AllocatedResources, old, updated.Requests)
	}
	if len(s.Conditions) != 1 || s.Conditions[0].Type != corev1.PodResizeInProgress || s.Conditions[0].ObservedGeneration != 2 {
		t.Errorf("conditions = %+v, want PodResizeInProgress of generation 2", s.Conditions)
	}

	// It reports the new ones: the resize is done.
	reported.ContainerStatuses[0].Resources = updated.DeepCopy()
	s, settled = withResizeStatus(pod, rec.view(), reported, current, true)
	if len(s.Conditions) != 0 || settled.applied != 2 {
		t.Errorf("conditions = %+v, settlement %+v after the provider applied the resize", s.Conditions, settled)
	}
	// Building the status is a check; recording its settlement the
	// transition.
	if rec.view().resize.inProgress != 2 {
		t.Error("building the status changed the record")
	}
	settled.record(rec)
	if rec.view().resize.inProgress != 0 {
		t.Error("the settlement of the applied resize was not recorded")
	}

	// A deferred resize: the condition, kept with its transition time.
	then := metav1.NewTime(metav1.Now().Add(-60e9))
	rec.resized("u1", allocationOf(pod), ResizeResult{Outcome: ResizeDeferred, Message: "later"}, 3)
	current.Conditions = []corev1.PodCondition{{Type: corev1.PodResizePending, Status: corev1.ConditionTrue, Reason: corev1.PodReasonDeferred, LastTransitionTime: then}}
	s, _ = withResizeStatus(pod, rec.view(), *current, current, false)
	if statusEqual(&s, current) {
		t.Error("no status due for a changed resize state")
	}
	if c := s.Conditions; len(c) != 1 || c[0].Reason != corev1.PodReasonDeferred || c[0].Message != "later" || !c[0].LastTransitionTime.Equal(&then) {
		t.Errorf("conditions = %+v, want PodResizePending/Deferred since %v", c, then)
	}

	// A finished pod has no resize.
	done := *current.DeepCopy()
	done.Phase = corev1.PodSucceeded
	if s, settled = withResizeStatus(pod, rec.view(), done, current, true); len(s.Conditions) != 0 || !settled.ended {
		t.Errorf("conditions of a finished pod = %+v, settlement %+v", s.Conditions, settled)
	}
}

// TestResizeWithdrawn: a deferred resize whose spec goes back to the
// allocation is pending no more; the provider is not asked.
func TestResizeWithdrawn(t *testing.T) {
	old := resources("100m", "200m", "64Mi")
	p := &resizerProvider{result: ResizeResult{Outcome: ResizeDeferred}}
	pc := newTestController(t, p)
	rec := pc.pods.get("ns/p")
	rec.allocated("u1", allocationOf(sizedPod(1, old)), 1)
	if _, err := pc.allocate(context.Background(), actionUpdate, sizedPod(2, resources("1", "2", "64Mi")), sizedPod(2, old), rec); err != nil {
		t.Fatal(err)
	}
	if rec.view().resize.pending == nil {
		t.Fatal("deferred resize not pending")
	}
	if _, err := pc.allocate(context.Background(), actionUpdate, sizedPod(3, old), sizedPod(3, old), rec); err != nil {
		t.Fatal(err)
	}
	if st := rec.view(); st.resize.pending != nil || len(p.resized) != 1 {
		t.Errorf("pending %+v after the spec went back, %d ResizePod calls", st.resize.pending, len(p.resized))
	}
}

// TestPodLevelResize: pod-level resources are allocated, resized and
// reported (status.resources, status.allocatedResources) as the
// containers' are.
func TestPodLevelResize(t *testing.T) {
	old, updated := resources("100m", "200m", "64Mi"), resources("150m", "300m", "64Mi")
	pod := sizedPod(1, corev1.ResourceRequirements{})
	pod.Spec.Resources = old.DeepCopy()
	p := &resizerProvider{result: ResizeResult{Outcome: ResizeDone}}
	pc := newTestController(t, p)
	rec := pc.pods.get("ns/p")
	rec.allocated("u1", allocationOf(pod), 1)

	resized := pod.DeepCopy()
	resized.Generation = 2
	resized.Spec.Resources = updated.DeepCopy()
	given, err := pc.allocate(context.Background(), actionUpdate, resized, resized, rec)
	if err != nil {
		t.Fatal(err)
	}
	if len(p.resized) != 1 || p.resized[0].PodLevel == nil || len(p.resized[0].Containers) != 0 ||
		!apiequality.Semantic.DeepEqual(p.resized[0].PodLevel.To, updated) {
		t.Fatalf("ResizePod got %+v, want the pod-level change only", p.resized)
	}
	if !apiequality.Semantic.DeepEqual(*given.Spec.Resources, updated) {
		t.Errorf("the provider is given %v", given.Spec.Resources)
	}
	rec.handedOver(resized)
	s, _ := withResizeStatus(resized, rec.view(), corev1.PodStatus{Phase: corev1.PodRunning}, &corev1.PodStatus{}, true)
	if s.Resources == nil || !s.Resources.Limits.Cpu().Equal(resource.MustParse("300m")) || !s.AllocatedResources.Cpu().Equal(resource.MustParse("150m")) {
		t.Errorf("pod status resources %v allocated %v, want the new pod-level ones", s.Resources, s.AllocatedResources)
	}
}
