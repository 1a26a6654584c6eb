package node

import (
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"
)

func running(name string, ready bool) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, Ready: ready, Started: ptr.To(true),
		State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{}}}
}

func exited(name string, code int32) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: code}}}
}

func waiting(name, reason string) corev1.ContainerStatus {
	return corev1.ContainerStatus{Name: name, State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: reason}}}
}

// conds renders conditions as "Type=Status(Reason: Message)" for comparison.
func conds(s corev1.PodStatus) map[corev1.PodConditionType]string {
	out := map[corev1.PodConditionType]string{}
	for _, c := range s.Conditions {
		out[c.Type] = fmt.Sprintf("%s(%s: %s)", c.Status, c.Reason, c.Message)
	}
	return out
}

func TestKubeletConditions(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{
		InitContainers: []corev1.Container{{Name: "setup"}, {Name: "proxy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)}},
		Containers:     []corev1.Container{{Name: "app"}, {Name: "log"}},
	}}
	gated := pod.DeepCopy()
	gated.Spec.ReadinessGates = []corev1.PodReadinessGate{{ConditionType: "example.com/lb"}}

	for _, tc := range []struct {
		name    string
		pod     *corev1.Pod
		current []corev1.PodCondition
		status  corev1.PodStatus
		want    map[corev1.PodConditionType]string
	}{
		{"being created", pod, nil, corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{waiting("setup", "ContainerCreating"), waiting("proxy", "ContainerCreating")}},
			map[corev1.PodConditionType]string{
				corev1.PodReadyToStartContainers: "False(: )",
				corev1.PodInitialized:            "False(ContainersNotInitialized: containers with incomplete status: [setup proxy])",
				corev1.ContainersReady:           "False(ContainersNotReady: containers with unknown status: [app log], containers with unready status: [proxy])",
				corev1.PodReady:                  "False(ContainersNotReady: containers with unknown status: [app log], containers with unready status: [proxy])",
			}},
		{"init running", pod, nil, corev1.PodStatus{Phase: corev1.PodPending,
			InitContainerStatuses: []corev1.ContainerStatus{running("setup", false), waiting("proxy", "PodInitializing")}},
			map[corev1.PodConditionType]string{
				corev1.PodReadyToStartContainers: "True(: )",
				corev1.PodInitialized:            "False(ContainersNotInitialized: containers with incomplete status: [setup proxy])",
			}},
		{"all ready", pod, nil, corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{exited("setup", 0), running("proxy", true)},
			ContainerStatuses:     []corev1.ContainerStatus{running("app", true), running("log", true)}},
			map[corev1.PodConditionType]string{
				corev1.PodReadyToStartContainers: "True(: )", corev1.PodInitialized: "True(: )",
				corev1.ContainersReady: "True(: )", corev1.PodReady: "True(: )",
			}},
		{"one unready", pod, nil, corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{exited("setup", 0), running("proxy", true)},
			ContainerStatuses:     []corev1.ContainerStatus{running("app", true), running("log", false)}},
			map[corev1.PodConditionType]string{
				corev1.ContainersReady: "False(ContainersNotReady: containers with unready status: [log])",
				corev1.PodReady:        "False(ContainersNotReady: containers with unready status: [log])",
			}},
		{"gate missing", gated, nil, corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{exited("setup", 0), running("proxy", true)},
			ContainerStatuses:     []corev1.ContainerStatus{running("app", true), running("log", true)}},
			map[corev1.PodConditionType]string{
				corev1.ContainersReady: "True(: )",
				corev1.PodReady:        `False(ReadinessGatesNotReady: corresponding condition of pod readiness gate "example.com/lb" does not exist.)`,
			}},
		{"gate true in Kubernetes", gated, []corev1.PodCondition{{Type: "example.com/lb", Status: corev1.ConditionTrue}}, corev1.PodStatus{Phase: corev1.PodRunning,
			InitContainerStatuses: []corev1.ContainerStatus{exited("setup", 0), running("proxy", true)},
			ContainerStatuses:     []corev1.ContainerStatus{running("app", true), running("log", true)}},
			map[corev1.PodConditionType]string{corev1.PodReady: "True(: )"}},
		{"succeeded", pod, nil, corev1.PodStatus{Phase: corev1.PodSucceeded,
			InitContainerStatuses: []corev1.ContainerStatus{exited("setup", 0), exited("proxy", 0)},
			ContainerStatuses:     []corev1.ContainerStatus{exited("app", 0), exited("log", 0)}},
			map[corev1.PodConditionType]string{
				corev1.PodInitialized: "True(: )", corev1.ContainersReady: "False(PodCompleted: )", corev1.PodReady: "False(PodCompleted: )",
			}},
		{"init failed", pod, nil, corev1.PodStatus{Phase: corev1.PodFailed,
			InitContainerStatuses: []corev1.ContainerStatus{exited("setup", 1), waiting("proxy", "PodInitializing")}},
			map[corev1.PodConditionType]string{
				corev1.PodInitialized:  "False(ContainersNotInitialized: containers with incomplete status: [setup proxy])",
				corev1.ContainersReady: "False(PodFailed: )",
			}},
		{"provider's own kept", pod, nil, corev1.PodStatus{Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, Reason: "Mine"}}},
			map[corev1.PodConditionType]string{corev1.PodReady: "True(Mine: )"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := conds(withKubeletConditions(tc.pod, corev1.PodStatus{Conditions: tc.current}, tc.status, metav1.Now()))
			for typ, want := range tc.want {
				if got[typ] != want {
					t.Errorf("%s = %q, want %q", typ, got[typ], want)
				}
			}
		})
	}
}

func TestConditionTransitionTimes(t *testing.T) {
	pod := &corev1.Pod{Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app"}}}}
	t0 := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	t1 := metav1.NewTime(t0.Add(time.Minute))
	t2 := metav1.NewTime(t0.Add(2 * time.Minute))
	ready := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running("app", true)}}
	unready := corev1.PodStatus{Phase: corev1.PodRunning, ContainerStatuses: []corev1.ContainerStatus{running("app", false)}}

	first := withKubeletConditions(pod, corev1.PodStatus{}, unready, t0)
	again := withKubeletConditions(pod, first, unready, t1)
	flipped := withKubeletConditions(pod, again, ready, t2)
	at := func(s corev1.PodStatus, typ corev1.PodConditionType) metav1.Time {
		for _, c := range s.Conditions {
			if c.Type == typ {
				return c.LastTransitionTime
			}
		}
		t.Fatalf("no %s condition", typ)
		return metav1.Time{}
	}
	if !at(again, corev1.PodReady).Time.Equal(t0.Time) {
		t.Error("Ready's transition time moved without a change")
	}
	if !at(flipped, corev1.PodReady).Time.Equal(t2.Time) || !at(flipped, corev1.PodInitialized).Time.Equal(t0.Time) {
		t.Errorf("on a change only the changed condition moves: Ready %s, Initialized %s", at(flipped, corev1.PodReady), at(flipped, corev1.PodInitialized))
	}
}
