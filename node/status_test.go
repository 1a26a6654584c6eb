package node

import (
	"context"
	"errors"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

func TestMergeStatus(t *testing.T) {
	start := metav1.NewTime(time.Unix(1000, 0))
	current := corev1.PodStatus{
		Phase:     corev1.PodPending,
		QOSClass:  corev1.PodQOSBestEffort,
		StartTime: &start,
		HostIP:    "10.0.0.2",
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodScheduled, Status: corev1.ConditionTrue},
			{Type: corev1.PodReady, Status: corev1.ConditionFalse},
		},
	}
	provider := corev1.PodStatus{
		Phase:      corev1.PodRunning,
		PodIP:      "10.1.0.1",
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}
	got := mergeStatus(current, provider)
	if got.Phase != corev1.PodRunning || got.PodIP != "10.1.0.1" {
		t.Errorf("provider fields lost: %+v", got)
	}
	if got.QOSClass != corev1.PodQOSBestEffort || got.StartTime != &start || got.HostIP != "10.0.0.2" {
		t.Errorf("fields the provider left unset must be kept: %+v", got)
	}
	if len(got.Conditions) != 2 || got.Conditions[0].Type != corev1.PodReady || got.Conditions[0].Status != corev1.ConditionTrue ||
		got.Conditions[1].Type != corev1.PodScheduled {
		t.Errorf("conditions = %+v, want provider's Ready and the scheduler's PodScheduled", got.Conditions)
	}

	// A finished pod never goes back to running.
	done := corev1.PodStatus{Phase: corev1.PodSucceeded}
	if got := mergeStatus(done, provider); got.Phase != corev1.PodSucceeded {
		t.Errorf("terminal phase overwritten with %s", got.Phase)
	}
}

func TestIsTerminalStatus(t *testing.T) {
	term := corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{}}
	run := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	cases := []struct {
		s    corev1.PodStatus
		want bool
	}{
		{corev1.PodStatus{Phase: corev1.PodSucceeded}, true},
		{corev1.PodStatus{Phase: corev1.PodFailed}, true},
		{corev1.PodStatus{Phase: corev1.PodRunning}, false},
		{corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{State: term}, {State: term}}}, true},
		{corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{{State: term}, {State: run}}}, false},
	}
	for i, c := range cases {
		if got := isTerminalStatus(&c.s); got != c.want {
			t.Errorf("case %d: got %v, want %v", i, got, c.want)
		}
	}
}

func TestStatusEqualIgnoresSubsecondTimes(t *testing.T) {
	a := corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: time.Unix(100, 5)}}
	b := corev1.PodStatus{Phase: corev1.PodRunning, StartTime: &metav1.Time{Time: time.Unix(100, 0)}}
	if !statusEqual(&a, &b) {
		t.Error("statuses equal to the second must compare equal: the API server stores seconds")
	}
	b.Phase = corev1.PodSucceeded
	if statusEqual(&a, &b) {
		t.Error("different phases compared equal")
	}
}

func TestNeedsSync(t *testing.T) {
	base := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{UID: "1", Labels: map[string]string{"a": "b"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "v1"}}},
	}
	now := metav1.Now()
	cases := map[string]struct {
		mutate func(*corev1.Pod)
		want   bool
	}{
		"status only":   {func(p *corev1.Pod) { p.Status.Phase = corev1.PodRunning; p.ResourceVersion = "9" }, false},
		"image":         {func(p *corev1.Pod) { p.Spec.Containers[0].Image = "v2" }, true},
		"label":         {func(p *corev1.Pod) { p.Labels["a"] = "c" }, true},
		"annotation":    {func(p *corev1.Pod) { p.Annotations = map[string]string{"x": "y"} }, true},
		"deletion":      {func(p *corev1.Pod) { p.DeletionTimestamp = &now }, true},
		"grace changed": {func(p *corev1.Pod) { g := int64(0); p.DeletionGracePeriodSeconds = &g }, true},
		"new uid":       {func(p *corev1.Pod) { p.UID = "2" }, true},
	}
	for name, c := range cases {
		cur := base.DeepCopy()
		c.mutate(cur)
		if got := needsSync(base, cur); got != c.want {
			t.Errorf("%s: needsSync = %v, want %v", name, got, c.want)
		}
	}

	// With generations set, they decide whether the spec changed.
	withGen := base.DeepCopy()
	withGen.Generation = 3
	cur := withGen.DeepCopy()
	cur.Spec.Containers[0].Image = "v2" // a spec change the server has not counted cannot happen
	if needsSync(withGen, cur) {
		t.Error("equal generations mean an equal spec")
	}
	cur.Generation = 4
	if !needsSync(withGen, cur) {
		t.Error("a new generation is a spec change")
	}
}

func TestRetryUntilPermanent(t *testing.T) {
	gr := schema.GroupResource{Resource: "pods"}
	transient := []error{
		errors.New("connection refused"),
		apierrors.NewServiceUnavailable("down"),
		apierrors.NewTimeoutError("slow", 1),
		apierrors.NewTooManyRequests("busy", 1),
		apierrors.NewConflict(gr, "p", errors.New("changed")),
	}
	for _, err := range transient {
		if _, giveUp := retryUntilPermanent(context.Background(), "ns/p", 1000, time.Time{}, err); giveUp != nil {
			t.Errorf("gave up on transient %v", err)
		}
	}
	permanent := []error{
		apierrors.NewNotFound(gr, "p"),
		apierrors.NewInvalid(schema.GroupKind{Kind: "Pod"}, "p", nil),
		apierrors.NewBadRequest("no"),
		errdefs.InvalidInput("bad"),
	}
	for _, err := range permanent {
		if _, giveUp := retryUntilPermanent(context.Background(), "ns/p", 1, time.Time{}, err); giveUp == nil {
			t.Errorf("kept retrying permanent %v", err)
		}
	}
}

func TestTerminatedStatus(t *testing.T) {
	started := metav1.NewTime(time.Unix(50, 0))
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "a"}, {Name: "b"}, {Name: "never-reported", Image: "img"}}}}
	s := terminatedStatus(pod, corev1.PodStatus{
		Phase: corev1.PodRunning,
		ContainerStatuses: []corev1.ContainerStatus{
			{Name: "a", Ready: true, ContainerID: "x://1", State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: started}}},
			{Name: "b", State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0}}},
		},
		Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}},
	}, ReasonProviderLost, "gone", "ContainerStatusUnknown", "not located")
	if s.Phase != corev1.PodFailed || s.Reason != ReasonProviderLost || s.Message != "gone" {
		t.Errorf("phase %s reason %s message %q", s.Phase, s.Reason, s.Message)
	}
	a := s.ContainerStatuses[0]
	if a.Ready || a.State.Terminated == nil || a.State.Terminated.ExitCode != 137 ||
		a.State.Terminated.Reason != "ContainerStatusUnknown" || a.State.Terminated.Message != "not located" ||
		!a.State.Terminated.StartedAt.Equal(&started) || a.State.Terminated.ContainerID != "x://1" {
		t.Errorf("running container not terminated as the kubelet does: %+v", a)
	}
	if b := s.ContainerStatuses[1]; b.State.Terminated.ExitCode != 0 {
		t.Errorf("already terminated container changed: %+v", b)
	}
	if len(s.ContainerStatuses) != 3 {
		t.Fatalf("want a status for each of the 3 containers, got %d", len(s.ContainerStatuses))
	}
	if c := s.ContainerStatuses[2]; c.Name != "never-reported" || c.Image != "img" || c.State.Terminated == nil || c.State.Terminated.ExitCode != 137 {
		t.Errorf("container with no status not terminated: %+v", c)
	}
	if s.Conditions[0].Status != corev1.ConditionFalse {
		t.Error("Ready must be false")
	}
	if !isTerminalStatus(&s) {
		t.Error("not terminal")
	}
}

func TestEverStarted(t *testing.T) {
	running := corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}
	waiting := corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ContainerCreating"}}
	for _, tc := range []struct {
		name string
		s    corev1.PodStatus
		want bool
	}{
		{"new pod", corev1.PodStatus{Phase: corev1.PodPending}, false},
		{"creating", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{State: waiting}}}, false},
		{"config error", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: ReasonCreateContainerConfigError}}}}}, false},
		{"running", corev1.PodStatus{Phase: corev1.PodRunning}, true},
		{"init running", corev1.PodStatus{Phase: corev1.PodPending, InitContainerStatuses: []corev1.ContainerStatus{{State: running}}}, true},
		{"crash loop", corev1.PodStatus{Phase: corev1.PodPending, ContainerStatuses: []corev1.ContainerStatus{{State: waiting, RestartCount: 2}}}, true},
	} {
		if got := everStarted(&tc.s); got != tc.want {
			t.Errorf("%s: everStarted = %v, want %v", tc.name, got, tc.want)
		}
	}
}
