package node

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

func testPod(uid types.UID, status corev1.PodStatus) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: uid, Generation: 1}, Status: status}
}

var (
	podRunning   = corev1.PodStatus{Phase: corev1.PodRunning}
	podSucceeded = corev1.PodStatus{Phase: corev1.PodSucceeded}
)

func TestPodRecordTransitions(t *testing.T) {
	for _, tc := range []struct {
		name  string
		steps func(r *podRecord)
		check func(t *testing.T, s podState)
	}{{
		name: "handedOver remembers the pod and clears an earlier delete",
		steps: func(r *podRecord) {
			r.providerDeleted(30)
			r.handedOver(testPod("u1", podRunning))
		},
		check: func(t *testing.T, s podState) {
			if s.applied == nil || s.applied.uid != "u1" || s.appliedAt.IsZero() {
				t.Errorf("applied = %+v at %v, want u1 now", s.applied, s.appliedAt)
			}
			if s.providerDeleted {
				t.Error("a pod handed over again is not deleted from the provider")
			}
		},
	}, {
		name: "replaced forgets the earlier pod but not what the informer and delete queue need",
		steps: func(r *podRecord) {
			r.handedOver(testPod("u1", podRunning))
			r.providerReported(testPod("u1", podRunning))
			r.providerDeleted(30)
			r.stopForcedWith(testPod("u1", podSucceeded))
			r.configMissing(true)
			r.objectDeleted("u0")
			r.objectGone(testPod("u1", podRunning))
			r.replaced()
		},
		check: func(t *testing.T, s podState) {
			if s.applied != nil || s.provider != nil || s.providerDeleted || s.stopForced || s.waitingForConfig || s.deleteGrace != 0 {
				t.Errorf("state of the earlier pod survived: %+v", s)
			}
			if s.objectDeleted != "u0" || s.last == nil {
				t.Errorf("objectDeleted %q, last %v: want kept", s.objectDeleted, s.last)
			}
		},
	}, {
		name: "a probe change during the write of a view keeps a view to write after it",
		steps: func(r *podRecord) {
			r.providerReported(testPod("u1", podRunning))
			writing := r.view().provider
			r.probeChanged(testPod("u1", podSucceeded))
			r.statusWritten(writing, &patchedStatus{status: podRunning})
		},
		check: func(t *testing.T, s podState) {
			if s.provider == nil || s.provider.Status.Phase != corev1.PodRunning {
				t.Errorf("provider view %v, want the one being written, to write again", s.provider)
			}
		},
	}, {
		name: "createStarted is undone by its end",
		steps: func(r *podRecord) {
			end := r.createStarted()
			if !r.view().creating {
				panic("not creating after createStarted")
			}
			end()
		},
		check: func(t *testing.T, s podState) {
			if s.creating {
				t.Error("still creating after the create ended")
			}
		},
	}, {
		name: "providerReported keeps a copy: the provider may change its object",
		steps: func(r *podRecord) {
			p := testPod("u1", podRunning)
			p.Status.Message = "first"
			r.providerReported(p)
			p.Status.Message = "changed by the provider"
		},
		check: func(t *testing.T, s podState) {
			if s.provider.Status.Message != "first" {
				t.Errorf("recorded status changed with the provider's object: %q", s.provider.Status.Message)
			}
			if s.provider.Spec.Containers != nil || s.provider.Labels != nil {
				t.Error("more than identity and status kept")
			}
		},
	}, {
		name: "statusWritten drops the view it wrote and keeps the write until the informer sees it",
		steps: func(r *podRecord) {
			r.providerReported(testPod("u1", podRunning))
			pp := r.view().provider
			r.statusWritten(pp, &patchedStatus{resourceVersion: "12", status: podRunning})
			r.informerSaw("11")
		},
		check: func(t *testing.T, s podState) {
			if s.provider != nil {
				t.Error("written view kept")
			}
			if s.patched == nil || s.patched.resourceVersion != "12" {
				t.Errorf("patched = %+v, want resource version 12 (informer at 11)", s.patched)
			}
		},
	}, {
		name: "statusWritten keeps a newer view that arrived during the write",
		steps: func(r *podRecord) {
			r.providerReported(testPod("u1", podRunning))
			pp := r.view().provider
			r.providerReported(testPod("u1", podSucceeded))
			r.statusWritten(pp, nil)
		},
		check: func(t *testing.T, s podState) {
			if s.provider == nil || s.provider.Status.Phase != corev1.PodSucceeded {
				t.Errorf("newer view lost: %v", s.provider)
			}
			if s.patched != nil {
				t.Error("nothing was written, yet a write is recorded")
			}
		},
	}, {
		name: "informerSaw our write: the copy is dropped",
		steps: func(r *podRecord) {
			r.statusWritten(nil, &patchedStatus{resourceVersion: "12", status: podRunning})
			r.informerSaw("12")
		},
		check: func(t *testing.T, s podState) {
			if s.patched != nil {
				t.Error("copy of the status kept after the informer caught up")
			}
		},
	}, {
		name:  "providerDeleted records the grace and when",
		steps: func(r *podRecord) { r.providerDeleted(5) },
		check: func(t *testing.T, s podState) {
			if !s.providerDeleted || s.deleteGrace != 5 || s.deletedAt.IsZero() {
				t.Errorf("got %+v", s)
			}
		},
	}} {
		t.Run(tc.name, func(t *testing.T) {
			r := &podRecord{}
			tc.steps(r)
			tc.check(t, r.view())
		})
	}
}

func TestFreshestStatus(t *testing.T) {
	r := &podRecord{}
	r.statusWritten(nil, &patchedStatus{resourceVersion: "12", status: podRunning})

	stale := testPod("u1", corev1.PodStatus{Phase: corev1.PodPending})
	stale.ResourceVersion = "11"
	if got := r.freshestStatus(stale); got.Phase != corev1.PodRunning {
		t.Errorf("informer behind our write: got %s, want our Running", got.Phase)
	}
	caughtUp := testPod("u1", podSucceeded)
	caughtUp.ResourceVersion = "13"
	if got := r.freshestStatus(caughtUp); got.Phase != corev1.PodSucceeded {
		t.Errorf("informer ahead: got %s, want its Succeeded", got.Phase)
	}
	if r.view().patched != nil {
		t.Error("the write's copy is kept after the informer passed it")
	}
}

func TestStopOnGone(t *testing.T) {
	applied := appliedOf(testPod("u1", podRunning))
	for _, tc := range []struct {
		name      string
		state     podState
		wantStop  bool
		wantGrace *int64
	}{
		{name: "never handed over, no object", state: podState{}},
		{name: "object gone, provider not told: stop it", state: podState{last: testPod("u1", podRunning), applied: &applied}, wantStop: true},
		{name: "store dropped the object: stop it by identity", state: podState{applied: &applied}, wantStop: true},
		{name: "we removed it after its terminal status", state: podState{
			last: testPod("u1", podRunning), applied: &applied, providerDeleted: true, deleteGrace: 30, objectDeleted: "u1"}},
		{name: "told and terminal", state: podState{last: testPod("u1", podSucceeded), applied: &applied, providerDeleted: true, deleteGrace: 30}},
		{name: "told with grace 0 already", state: podState{last: testPod("u1", podRunning), applied: &applied, providerDeleted: true}},
		{name: "force deleted while stopping: grace 0 now", state: podState{
			last: testPod("u1", podRunning), applied: &applied, providerDeleted: true, deleteGrace: 30},
			wantStop: true, wantGrace: ptr.To[int64](0)},
		{name: "we forced the stop: grace 0 now", state: podState{
			last: testPod("u1", podSucceeded), applied: &applied, providerDeleted: true, deleteGrace: 30, objectDeleted: "u1", stopForced: true},
			wantStop: true, wantGrace: ptr.To[int64](0)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.state.stopOnGone("ns", "p")
			if (got != nil) != tc.wantStop {
				t.Fatalf("stop = %v, want %v", got != nil, tc.wantStop)
			}
			if got == nil {
				return
			}
			if got.Namespace != "ns" || got.Name != "p" || got.UID != "u1" {
				t.Errorf("stopped %s/%s %s, want ns/p u1", got.Namespace, got.Name, got.UID)
			}
			if g := got.DeletionGracePeriodSeconds; (g == nil) != (tc.wantGrace == nil) || g != nil && *g != *tc.wantGrace {
				t.Errorf("grace = %v, want %v", g, tc.wantGrace)
			}
			if tc.state.last != nil && got == tc.state.last {
				t.Error("the informer's object is handed to the provider, not a copy")
			}
		})
	}
}

func TestDeletionDecisions(t *testing.T) {
	applied := appliedOf(testPod("u1", podRunning))
	listed := time.Now()
	for _, tc := range []struct {
		name             string
		state            podState
		grace            int64
		terminal         bool
		wantTell         bool
		wantOrphan       bool
		deleting         bool
		wantLost         bool
		appliedAfterList bool
	}{
		{name: "new pod", wantTell: true, wantOrphan: true},
		{name: "handed over before the list", state: podState{applied: &applied}, grace: 30, wantTell: true, wantOrphan: true, wantLost: true},
		{name: "handed over after the list", state: podState{applied: &applied}, appliedAfterList: true, wantTell: true, wantOrphan: true},
		{name: "told with the same grace", state: podState{providerDeleted: true, deleteGrace: 30}, grace: 30, deleting: true, wantLost: true},
		{name: "told, grace shrank", state: podState{providerDeleted: true, deleteGrace: 30}, grace: 5, wantTell: true},
		{name: "told, grace 0 of our own final delete", state: podState{providerDeleted: true, deleteGrace: 30}, terminal: true},
		{name: "being created", state: podState{creating: true}, wantTell: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := tc.state
			if s.applied != nil {
				s.appliedAt = listed.Add(-time.Second)
				if tc.appliedAfterList {
					s.appliedAt = listed.Add(time.Second)
				}
			}
			if got := s.tellProvider(tc.grace, tc.terminal); got != tc.wantTell {
				t.Errorf("tellProvider = %v, want %v", got, tc.wantTell)
			}
			if got := s.mayBeOrphan(); got != tc.wantOrphan {
				t.Errorf("mayBeOrphan = %v, want %v", got, tc.wantOrphan)
			}
			if got := s.mayBeLost(tc.deleting, listed); got != tc.wantLost {
				t.Errorf("mayBeLost = %v, want %v", got, tc.wantLost)
			}
		})
	}
}

// scriptedProvider answers GetPod as told and counts DeletePod calls.
type scriptedProvider struct {
	nopProvider
	pod     *corev1.Pod
	err     error
	deleted int
}

func (p *scriptedProvider) GetPod(context.Context, string, string) (*corev1.Pod, error) {
	return p.pod, p.err
}

func (p *scriptedProvider) DeletePod(context.Context, *corev1.Pod) error {
	p.deleted++
	return nil
}

func TestFirstSight(t *testing.T) {
	resolved := testPod("u1", corev1.PodStatus{Phase: corev1.PodPending})
	resolved.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}
	started := resolved.DeepCopy()
	started.Status = podRunning
	changed := resolved.DeepCopy()
	changed.Spec.Containers[0].Image = "j"
	broken := errors.New("backend unreachable")
	for _, tc := range []struct {
		name        string
		pod         *corev1.Pod
		provider    scriptedProvider
		want        providerAction
		wantErr     error
		wantDeletes int
		wantView    bool
	}{
		{name: "provider does not have it", pod: resolved, provider: scriptedProvider{err: errdefs.NotFound("no")}, want: actionCreate},
		{name: "provider answers nil", pod: resolved, want: actionCreate},
		{name: "it ran, and the provider lost it", pod: started, provider: scriptedProvider{err: errdefs.NotFound("no")}, want: actionLost},
		{name: "provider fails", pod: resolved, provider: scriptedProvider{err: broken}, wantErr: broken},
		{name: "provider runs an older pod of the name", pod: resolved, provider: scriptedProvider{pod: testPod("u0", podRunning)}, want: actionCreate, wantDeletes: 1},
		{name: "provider runs it as it is (restart adoption)", pod: resolved, provider: scriptedProvider{pod: withSpec(testPod("u1", podRunning), resolved.Spec)}, want: actionNone, wantView: true},
		{name: "provider runs an older spec", pod: changed, provider: scriptedProvider{pod: withSpec(testPod("u1", podRunning), resolved.Spec)}, want: actionUpdate, wantView: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p := tc.provider
			pc := newTestController(t, &p)
			got, err := pc.firstSight(context.Background(), tc.pod, pc.pods.get("ns/p"))
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("err = %v, want %v", err, tc.wantErr)
			}
			if got != tc.want {
				t.Errorf("action = %d, want %d", got, tc.want)
			}
			if p.deleted != tc.wantDeletes {
				t.Errorf("DeletePod calls = %d, want %d", p.deleted, tc.wantDeletes)
			}
			if _, queued := pc.LoadPod("ns/p"); queued != tc.wantView {
				t.Errorf("provider's status queued = %v, want %v", queued, tc.wantView)
			}
		})
	}
}

func withSpec(pod *corev1.Pod, spec corev1.PodSpec) *corev1.Pod {
	pod.Spec = *spec.DeepCopy()
	return pod
}

func newTestController(t *testing.T, p PodLifecycleHandler) *PodController {
	t.Helper()
	client := fake.NewClientset()
	pc, err := NewPodController(PodControllerConfig{
		PodClient: client.CoreV1(), PodInformer: informers.NewSharedInformerFactory(client, 0).Core().V1().Pods(),
		EventRecorder: record.NewFakeRecorder(10), Provider: p,
	})
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

// TestSeedAdapters: the seeds' LoadPod, StorePod, CheckAndUpdatePod and
// DeletePod are thin adapters over the pod records.
func TestSeedAdapters(t *testing.T) {
	pc := newTestController(t, nopProvider{})
	ctx := context.Background()
	if v, ok := pc.LoadPod("ns/p"); ok || v != nil {
		t.Fatalf("LoadPod of an unknown key = %v, %v", v, ok)
	}
	pc.StorePod("ns/p", testPod("u1", podRunning))
	v, ok := pc.LoadPod("ns/p")
	if p, _ := v.(*corev1.Pod); !ok || p == nil || p.Status.Phase != corev1.PodRunning {
		t.Fatalf("LoadPod after StorePod = %v, %v", v, ok)
	}

	// The same status again is no news; another one is recorded.
	pc.CheckAndUpdatePod(ctx, "ns/p", v, testPod("u1", podRunning))
	if again, _ := pc.LoadPod("ns/p"); again != v {
		t.Error("an unchanged status replaced the recorded view")
	}
	pc.CheckAndUpdatePod(ctx, "ns/p", v, testPod("u1", podSucceeded))
	if now, _ := pc.LoadPod("ns/p"); now.(*corev1.Pod).Status.Phase != corev1.PodSucceeded {
		t.Error("a changed status was not recorded")
	}
	// A view of another pod of the same name is news whatever its status.
	pc.CheckAndUpdatePod(ctx, "ns/p", testPod("u1", podSucceeded), testPod("u2", podSucceeded))
	if now, _ := pc.LoadPod("ns/p"); now.(*corev1.Pod).UID != "u2" {
		t.Error("the new pod's view was not recorded")
	}

	pc.DeletePod("ns/p")
	if _, ok := pc.LoadPod("ns/p"); ok {
		t.Error("DeletePod left the record")
	}
}
