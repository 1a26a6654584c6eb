package node

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// restarted is a running container that restarted n times.
func restarted(name string, n int32) corev1.ContainerStatus {
	c := running(name, true)
	c.RestartCount = n
	return c
}

func TestOnLossFollowsRestartPolicy(t *testing.T) {
	now := metav1.Now()
	for _, tc := range []struct {
		name     string
		policy   corev1.RestartPolicy
		deleting bool
		status   []corev1.ContainerStatus
		want     lossOutcome
	}{
		{name: "Always", policy: corev1.RestartPolicyAlways, status: []corev1.ContainerStatus{restarted("a", 0), restarted("b", 0)}, want: lossRestarts},
		{name: "Always, even after exit 0", policy: corev1.RestartPolicyAlways, status: []corev1.ContainerStatus{exited("a", 0), exited("b", 0)}, want: lossRestarts},
		{name: "Never", policy: corev1.RestartPolicyNever, status: []corev1.ContainerStatus{restarted("a", 0), restarted("b", 0)}, want: lossFails},
		{name: "OnFailure, running", policy: corev1.RestartPolicyOnFailure, status: []corev1.ContainerStatus{exited("a", 0), restarted("b", 0)}, want: lossRestarts},
		{name: "OnFailure, one failed", policy: corev1.RestartPolicyOnFailure, status: []corev1.ContainerStatus{exited("a", 0), exited("b", 1)}, want: lossRestarts},
		{name: "OnFailure, all exited 0", policy: corev1.RestartPolicyOnFailure, status: []corev1.ContainerStatus{exited("a", 0), exited("b", 0)}, want: lossFails},
		{name: "OnFailure, no status yet", policy: corev1.RestartPolicyOnFailure, want: lossRestarts},
		{name: "Always, being deleted", policy: corev1.RestartPolicyAlways, deleting: true, want: lossFails},
	} {
		t.Run(tc.name, func(t *testing.T) {
			pod := testPod("u1", podRunning)
			pod.Spec.RestartPolicy = tc.policy
			pod.Spec.Containers = []corev1.Container{{Name: "a"}, {Name: "b"}}
			if tc.deleting {
				pod.DeletionTimestamp = &now
			}
			if got := onLoss(pod, &corev1.PodStatus{ContainerStatuses: tc.status}); got != tc.want {
				t.Errorf("onLoss = %d, want %d", got, tc.want)
			}
		})
	}
}

func TestRestartsAfterLossCountOnTopOfTheProvider(t *testing.T) {
	pod := testPod("u1", podRunning)
	pod.Spec.InitContainers = []corev1.Container{{Name: "init"}}
	pod.Spec.Containers = []corev1.Container{{Name: "app"}, {Name: "new"}}
	known := corev1.PodStatus{
		InitContainerStatuses: []corev1.ContainerStatus{exited("init", 0)},
		ContainerStatuses:     []corev1.ContainerStatus{restarted("app", 2)},
	}
	restarts := restartsAfterLoss(pod, &known, metav1.Now())
	if restarts["init"].count != 1 || restarts["app"].count != 3 || restarts["new"].count != 1 {
		t.Fatalf("restarts = %+v", restarts)
	}

	// The provider's new run counts from 0, with no last state of its own
	// for app; its own restart of new (lastState set) is kept.
	reported := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{restarted("app", 0), restarted("new", 1)}}
	reported.ContainerStatuses[1].LastTerminationState.Terminated = &corev1.ContainerStateTerminated{ExitCode: 2}
	got := restarts.apply(&reported)
	app, other := got.ContainerStatuses[0], got.ContainerStatuses[1]
	if app.RestartCount != 3 || app.LastTerminationState.Terminated == nil || app.LastTerminationState.Terminated.Reason != "ContainerStatusUnknown" {
		t.Errorf("app: %+v", app)
	}
	if other.RestartCount != 2 || other.LastTerminationState.Terminated.ExitCode != 2 {
		t.Errorf("new: %+v", other)
	}
	if reported.ContainerStatuses[0].RestartCount != 0 {
		t.Error("apply changed the provider's status in place")
	}
	if none := containerRestarts(nil); none.apply(&reported) != &reported {
		t.Error("no restarts: apply should return the status itself")
	}
}

func TestUncountedRestartsOfAnAdoptedPod(t *testing.T) {
	known := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{restarted("a", 1), restarted("b", 4), restarted("c", 2)}}
	// a: the provider made it again after a loss (counts 0); b: it counts
	// its restarts itself and restarted once more; c: it does not report.
	reported := corev1.PodStatus{ContainerStatuses: []corev1.ContainerStatus{restarted("a", 0), restarted("b", 5)}}
	got := uncountedRestarts(&known, &reported)
	if len(got) != 1 || got["a"].count != 1 {
		t.Errorf("uncounted = %+v, want a: 1", got)
	}
	if got := uncountedRestarts(&known, &known); got != nil {
		t.Errorf("same counts: %+v, want none", got)
	}
}

func TestLostRestartingTransition(t *testing.T) {
	r := &podRecord{}
	r.handedOver(testPod("u1", podRunning))
	r.providerReported(testPod("u1", podRunning))
	r.lostRestarting(containerRestarts{"app": {count: 1}})
	s := r.view()
	if s.applied != nil || s.provider != nil || !s.recreate || s.restarts["app"].count != 1 {
		t.Fatalf("after lostRestarting: %+v", s)
	}
	r.handedOver(testPod("u1", podRunning))
	if s := r.view(); s.recreate || s.restarts["app"].count != 1 {
		t.Errorf("after the new CreatePod: recreate=%v restarts=%+v; the restarts stay, the flag goes", s.recreate, s.restarts)
	}
	r.replaced()
	if s := r.view(); s.restarts != nil || s.recreate {
		t.Errorf("replaced kept the earlier pod's restarts: %+v", s)
	}
}

// TestFirstSightOfALostPodToRecreate: once the loss is decided as a
// restart, the pod that ran is created, not reported lost again; an adopted
// pod gets the restarts the API server shows and the provider does not.
func TestFirstSightOfALostPodToRecreate(t *testing.T) {
	started := testPod("u1", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{restarted("c", 1)}})
	started.Spec.Containers = []corev1.Container{{Name: "c", Image: "i"}}

	p := &scriptedProvider{err: errdefs.NotFound("no")}
	pc := newTestController(t, p)
	rec := pc.pods.get("ns/p")
	rec.lostRestarting(containerRestarts{"c": {count: 2}})
	if got, err := pc.firstSight(context.Background(), started, rec); err != nil || got != actionCreate {
		t.Errorf("firstSight = %d, %v; want actionCreate", got, err)
	}

	adopted := testPod("u1", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{restarted("c", 0)}})
	p = &scriptedProvider{pod: withSpec(adopted, started.Spec)}
	pc = newTestController(t, p)
	rec = pc.pods.get("ns/p")
	if got, err := pc.firstSight(context.Background(), started, rec); err != nil || got != actionNone {
		t.Fatalf("firstSight = %d, %v; want actionNone", got, err)
	}
	view, _ := pc.LoadPod("ns/p")
	if n := view.(*corev1.Pod).Status.ContainerStatuses[0].RestartCount; n != 1 {
		t.Errorf("adopted pod's restart count = %d, want the API server's 1", n)
	}
}

// TestNotifiedLossFollowsRestartPolicy: a provider that notifies a pod
// with reason ProviderLost gets the restart policy's decision, as for a pod
// found missing; news of an earlier pod of the name changes nothing.
func TestNotifiedLossFollowsRestartPolicy(t *testing.T) {
	for _, policy := range []corev1.RestartPolicy{corev1.RestartPolicyAlways, corev1.RestartPolicyNever} {
		t.Run(string(policy), func(t *testing.T) {
			pc := newTestController(t, nopProvider{})
			pod := testPod("u1", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{restarted("c", 0)}})
			pod.Spec.RestartPolicy = policy
			pod.Spec.Containers = []corev1.Container{{Name: "c"}}
			if err := pc.informer.Informer().GetIndexer().Add(pod); err != nil {
				t.Fatal(err)
			}
			rec := pc.pods.get("ns/p")
			rec.handedOver(pod)
			lost := testPod("u1", corev1.PodStatus{Phase: corev1.PodFailed, Reason: ReasonProviderLost})

			stale := lost.DeepCopy()
			stale.UID = "u0"
			pc.onProviderPod(context.Background(), stale)
			if s := rec.view(); s.applied == nil || s.recreate || s.provider.Status.Reason == ReasonProviderLost && s.provider.UID == "u1" {
				t.Fatalf("news of an earlier pod was taken for this one's loss: %+v", s)
			}

			pc.onProviderPod(context.Background(), lost)
			s := rec.view()
			switch policy {
			case corev1.RestartPolicyAlways:
				if !s.recreate || s.applied != nil || s.restarts["c"].count != 1 {
					t.Errorf("Always: recreate=%v applied=%v restarts=%+v", s.recreate, s.applied, s.restarts)
				}
			case corev1.RestartPolicyNever:
				if s.recreate || s.provider == nil || s.provider.Status.Phase != corev1.PodFailed || s.provider.Status.Reason != ReasonProviderLost {
					t.Errorf("Never: recreate=%v status=%+v", s.recreate, s.provider)
				}
			}
		})
	}
}

// TestLossIsDecidedOnTheCachedPod: a resync lists the pods before it asks
// the provider about them. A deleting pod whose terminal status was written
// in between, and which the provider has therefore dropped, is not lost;
// one the cache still shows running is.
func TestLossIsDecidedOnTheCachedPod(t *testing.T) {
	pc := newTestController(t, nopProvider{})
	indexer := pc.informer.Informer().GetIndexer()
	now := metav1.Now()
	listed := testPod("u1", corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{restarted("c", 0)}})
	listed.DeletionTimestamp = &now
	listed.Spec.Containers = []corev1.Container{{Name: "c"}}
	done := listed.DeepCopy()
	done.Status = podSucceeded
	if err := indexer.Add(done); err != nil {
		t.Fatal(err)
	}
	rec := pc.pods.get("ns/p")
	rec.handedOver(listed)
	rec.providerDeleted(30)

	pc.lost(context.Background(), "ns/p", listed, rec)
	if s := rec.view(); s.provider != nil {
		t.Fatalf("a pod whose terminal status is written is marked %s/%s", s.provider.Status.Phase, s.provider.Status.Reason)
	}
	if n := len(pc.recorder.(*record.FakeRecorder).Events); n != 0 {
		t.Fatalf("%d events for a pod that was not lost", n)
	}

	if err := indexer.Update(listed); err != nil {
		t.Fatal(err)
	}
	pc.lost(context.Background(), "ns/p", listed, rec)
	if s := rec.view(); s.provider == nil || s.provider.Status.Reason != ReasonProviderLost {
		t.Errorf("a running pod the provider dropped is not marked lost: %+v", s.provider)
	}
}
