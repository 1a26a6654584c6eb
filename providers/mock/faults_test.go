package mock

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// transient reports whether err is a failure the controller retries: not
// one of the errdefs kinds.
func transient(err error) bool {
	return err != nil && !errdefs.IsNotFound(err) && !errdefs.IsInvalidInput(err)
}

func TestFailCallsUntilFailForEnds(t *testing.T) {
	p, r := newProvider(t)
	ctx := context.Background()
	pod := testPod("flaky", map[string]string{AnnotationFailCalls: "CreatePod, GetPod", AnnotationFailFor: "300ms"}, corev1.RestartPolicyAlways)
	start := time.Now()
	err := p.CreatePod(ctx, pod)
	if !transient(err) || !strings.Contains(err.Error(), "CreatePod") || !strings.Contains(err.Error(), AnnotationFailCalls) {
		t.Fatalf("CreatePod in the fault window: %v, want a transient error naming the call and the annotation", err)
	}
	for err != nil && time.Since(start) < 2*time.Second {
		time.Sleep(20 * time.Millisecond)
		err = p.CreatePod(ctx, pod)
	}
	if err != nil {
		t.Fatalf("CreatePod still fails %s after a 300ms window: %v", time.Since(start), err)
	}
	if took := time.Since(start); took < 300*time.Millisecond {
		t.Errorf("CreatePod succeeded after %s, inside the window", took)
	}
	if r.last().Status.Phase != corev1.PodRunning {
		t.Errorf("after recovery: %s", r.last().Status.Phase)
	}
	// The window has passed for the pod's other calls too.
	if _, err := p.GetPod(ctx, "ns", "flaky"); err != nil {
		t.Errorf("GetPod after the window: %v", err)
	}
	if p.faults.tracked() != 1 {
		t.Errorf("fault bookkeeping holds %d pods, want the running one", p.faults.tracked())
	}
	if err := p.DeletePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if n := p.faults.tracked(); n != 0 {
		t.Errorf("fault bookkeeping holds %d pods after the pod is gone", n)
	}
}

func TestFailCallsForEver(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	// Only the named calls fail; others work.
	pod := testPod("stuck", map[string]string{AnnotationFailCalls: "GetPodStatus,DeletePod"}, corev1.RestartPolicyAlways)
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if _, err := p.GetPod(ctx, "ns", "stuck"); err != nil {
		t.Errorf("GetPod is not named: %v", err)
	}
	if _, err := p.GetPodStatus(ctx, "ns", "stuck"); !transient(err) {
		t.Errorf("GetPodStatus: %v, want a transient error", err)
	}
	for range 3 {
		if err := p.DeletePod(ctx, pod); !transient(err) {
			t.Fatalf("DeletePod: %v, want a transient error", err)
		}
	}
	if pods, _ := p.GetPods(ctx); len(pods) != 1 {
		t.Errorf("a failed DeletePod stopped the pod: %d pods", len(pods))
	}

	all := testPod("down", map[string]string{AnnotationFailCalls: "*"}, corev1.RestartPolicyAlways)
	if err := p.CreatePod(ctx, all); !transient(err) {
		t.Errorf("* fails CreatePod: %v", err)
	}
}

func TestHangCalls(t *testing.T) {
	p, r := newProvider(t)
	pod := testPod("slow", map[string]string{AnnotationHangCalls: "CreatePod,DeletePod", AnnotationHangFor: "150ms"}, corev1.RestartPolicyAlways)
	start := time.Now()
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took < 150*time.Millisecond {
		t.Errorf("CreatePod returned after %s, want it to hang 150ms", took)
	}
	if r.last().Status.Phase != corev1.PodRunning {
		t.Errorf("the hanging call did not do its work: %s", r.last().Status.Phase)
	}
	// A caller that gives up first gets its context's error, and nothing is done.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Millisecond)
	defer cancel()
	if err := p.DeletePod(ctx, pod); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("DeletePod with a shorter deadline: %v", err)
	}
	if _, err := p.GetPod(context.Background(), "ns", "slow"); err != nil {
		t.Errorf("an abandoned DeletePod stopped the pod: %v", err)
	}

	// Without hang-for, until the context is done.
	forever := testPod("forever", map[string]string{AnnotationHangCalls: "CreatePod"}, corev1.RestartPolicyAlways)
	ctx, cancel = context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := p.CreatePod(ctx, forever); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CreatePod hanging for ever: %v", err)
	}
}

func TestHangIsBounded(t *testing.T) {
	p, r := newProvider(t)
	// The pod controller's calls have no deadline: a hang without hang-for
	// ends at the bound, and the call does its work.
	p.faults.maxHang = 50 * time.Millisecond
	pod := testPod("forever", map[string]string{AnnotationHangCalls: "CreatePod"}, corev1.RestartPolicyAlways)
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatalf("CreatePod hanging without a deadline: %v, want it done after the bound", err)
	}
	if r.last().Status.Phase != corev1.PodRunning {
		t.Errorf("the bounded hang did not do its work: %s", r.last().Status.Phase)
	}

	long := (MaxHang + time.Second).String()
	err := p.CreatePod(context.Background(), testPod("longer", map[string]string{AnnotationHangCalls: "CreatePod", AnnotationHangFor: long}, corev1.RestartPolicyAlways))
	want := fmt.Sprintf("annotation %s: %q is above the maximum of %s", AnnotationHangFor, long, MaxHang)
	if !errdefs.IsInvalidInput(err) || err.Error() != want {
		t.Errorf("hang-for %s: %v, want InvalidInput %q", long, err, want)
	}
}

func TestIgnoreStop(t *testing.T) {
	p, r := newProvider(t)
	ctx := context.Background()
	pod := testPod("immortal", map[string]string{AnnotationIgnoreStop: "true"}, corev1.RestartPolicyAlways)
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := p.DeletePod(ctx, pod); err != nil {
			t.Fatalf("DeletePod: %v, want nil: the backend says yes", err)
		}
	}
	status, err := p.GetPodStatus(ctx, "ns", "immortal")
	if err != nil || status.Phase != corev1.PodRunning {
		t.Errorf("after DeletePod: %v %v, want still Running", status, err)
	}
	if pods, _ := p.GetPods(ctx); len(pods) != 1 {
		t.Errorf("GetPods has %d pods, want the one still running", len(pods))
	}
	if r.last().Status.Phase != corev1.PodRunning {
		t.Errorf("a terminal status was reported: %s", r.last().Status.Phase)
	}
}

func TestBadFaultAnnotationIsInvalidInput(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	cases := []struct {
		ann  map[string]string
		name string
		want string
	}{
		{map[string]string{AnnotationFailCalls: "CreatePod,Explode"}, AnnotationFailCalls, `"Explode" is not a provider call (a comma list of CreatePod, UpdatePod, DeletePod, GetPodStatus, GetPod, or *)`},
		{map[string]string{AnnotationFailCalls: "GetPods"}, AnnotationFailCalls, `"GetPods" is not a provider call`},
		{map[string]string{AnnotationFailCalls: "*", AnnotationFailFor: "soon"}, AnnotationFailFor, "not a positive duration"},
		{map[string]string{AnnotationFailFor: "1m"}, AnnotationFailFor, "is set without " + AnnotationFailCalls},
		{map[string]string{AnnotationHangCalls: "GetPod", AnnotationHangFor: "0s"}, AnnotationHangFor, "not a positive duration"},
		{map[string]string{AnnotationIgnoreStop: "maybe"}, AnnotationIgnoreStop, "not a boolean"},
	}
	for _, c := range cases {
		err := p.CreatePod(ctx, testPod("bad", c.ann, corev1.RestartPolicyAlways))
		if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), "annotation "+c.name) || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%v: %v, want InvalidInput naming %s and saying %q", c.ann, err, c.name, c.want)
		}
	}
	// UpdatePod refuses them too, and keeps the pod as it was.
	if err := p.CreatePod(ctx, testPod("ok", nil, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	if err := p.UpdatePod(ctx, testPod("ok", map[string]string{AnnotationFailCalls: "nope"}, corev1.RestartPolicyAlways)); !errdefs.IsInvalidInput(err) {
		t.Errorf("UpdatePod with a bad fault annotation: %v", err)
	}
	if _, err := p.GetPod(ctx, "ns", "ok"); err != nil {
		t.Errorf("GetPod after a refused update: %v", err)
	}
}

func TestNodeFaultsFromConfig(t *testing.T) {
	p, _ := newProvider(t)
	ctx := context.Background()
	p.faults = newFaults("vk0", faultSpec{fail: nodeCalls, failFor: 200 * time.Millisecond}, 0, podEvents{})
	pod := testPod("any", nil, corev1.RestartPolicyAlways)
	if err := p.CreatePod(ctx, pod); !transient(err) || !strings.Contains(err.Error(), "provider config") {
		t.Errorf("CreatePod while the provider is down: %v", err)
	}
	if _, err := p.GetPods(ctx); !transient(err) {
		t.Errorf("GetPods while the provider is down: %v", err)
	}
	time.Sleep(250 * time.Millisecond)
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Errorf("CreatePod after the provider recovered: %v", err)
	}
	if pods, err := p.GetPods(ctx); err != nil || len(pods) != 1 {
		t.Errorf("GetPods after recovery: %d pods, %v", len(pods), err)
	}
}

// tracked is how many pods' first calls the bookkeeping holds.
func (f *faults) tracked() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.firstCall)
}
