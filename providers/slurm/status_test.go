package slurm

import (
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

func TestPodStatusFromJobAndFiles(t *testing.T) {
	pod := testPod("p", shell("a", "true"), shell("b", "true"))
	pod.Spec.InitContainers = []corev1.Container{shell("init", "true")}
	t0 := time.Unix(1_800_000_000, 0)
	ran := containerFiles{started: t0}
	ok := containerFiles{started: t0, finished: t0.Add(time.Second)}
	failed := containerFiles{started: t0, finished: t0.Add(time.Second), exitCode: 3}
	jobIn := func(state string) *job { return &job{ID: 1, State: state, StartTime: t0.Unix()} }

	for _, tc := range []struct {
		name        string
		view        jobView
		phase       corev1.PodPhase
		reason      string
		a, b        string // each main container's state: waiting, running or the exit code
		aWaitReason string
	}{
		{"pending job", jobView{job: &job{State: statePending, Reason: "Resources"}}, corev1.PodPending, "", "waiting", "waiting", "PodInitializing"},
		{"init running", jobView{job: jobIn(stateRunning), files: map[string]containerFiles{"init": ran}}, corev1.PodPending, "", "waiting", "waiting", "PodInitializing"},
		{"init done, containers not started yet", jobView{job: jobIn(stateRunning), files: map[string]containerFiles{"init": ok}}, corev1.PodPending, "", "waiting", "waiting", "ContainerCreating"},
		{"running", jobView{job: jobIn(stateRunning), files: map[string]containerFiles{"init": ok, "a": ran, "b": ran}}, corev1.PodRunning, "", "running", "running", ""},
		{"one exits 3 while the job runs", jobView{job: jobIn(stateRunning), files: map[string]containerFiles{"init": ok, "a": failed, "b": ran}}, corev1.PodRunning, "", "3", "running", ""},
		{"all exited, one 3", jobView{job: jobIn(stateRunning), files: map[string]containerFiles{"init": ok, "a": failed, "b": ok}}, corev1.PodFailed, "", "3", "0", ""},
		{"completed", jobView{job: jobIn("COMPLETED"), files: map[string]containerFiles{"init": ok, "a": ok, "b": ok}}, corev1.PodSucceeded, "", "0", "0", ""},
		{"time limit", jobView{job: jobIn(stateTimeout), files: map[string]containerFiles{"init": ok, "a": ran, "b": ok}}, corev1.PodFailed, "DeadlineExceeded", "137", "0", ""},
		{"past the active deadline, a container already ended by TERM", jobView{pastDeadline: true, job: jobIn(stateRunning), files: map[string]containerFiles{"init": ok, "a": {started: t0, finished: t0.Add(time.Second), exitCode: 143}, "b": ran}}, corev1.PodFailed, "DeadlineExceeded", "143", "137", ""},
		{"out of memory", jobView{job: jobIn(stateOOM), files: map[string]containerFiles{"init": ok, "a": ran, "b": ran}}, corev1.PodFailed, "OOMKilled", "137", "137", ""},
		{"cancelled", jobView{job: jobIn(stateCancelled), files: map[string]containerFiles{"init": ok, "a": ran, "b": ran}}, corev1.PodFailed, "SlurmCancelled", "137", "137", ""},
		{"init failed", jobView{job: jobIn("FAILED"), files: map[string]containerFiles{"init": failed}}, corev1.PodFailed, "", "waiting", "waiting", "PodInitializing"},
		{"gone from squeue", jobView{gone: true, files: map[string]containerFiles{"init": ok, "a": ok, "b": ok}}, corev1.PodSucceeded, "", "0", "0", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := podStatus(pod, tc.view)
			if s.Phase != tc.phase || s.Reason != tc.reason {
				t.Errorf("phase %s reason %q, want %s %q", s.Phase, s.Reason, tc.phase, tc.reason)
			}
			for i, want := range []string{tc.a, tc.b} {
				cs := s.ContainerStatuses[i]
				got := "waiting"
				switch {
				case cs.State.Running != nil:
					got = "running"
				case cs.State.Terminated != nil:
					got = strconv.Itoa(int(cs.State.Terminated.ExitCode))
				}
				if got != want {
					t.Errorf("container %s: %s, want %s (%+v)", cs.Name, got, want, cs.State)
				}
			}
			if w := s.ContainerStatuses[0].State.Waiting; tc.aWaitReason != "" && (w == nil || w.Reason != tc.aWaitReason) {
				t.Errorf("waiting %+v, want reason %s", w, tc.aWaitReason)
			}
		})
	}
	if s := podStatus(pod, jobView{job: jobIn(stateOOM), files: map[string]containerFiles{"init": ok}}); s.ContainerStatuses[0].State.Terminated.Reason != "OOMKilled" {
		t.Errorf("OOM: container reason %+v", s.ContainerStatuses[0].State.Terminated)
	}
}

func TestReachedDeadlineOnceFromJobStart(t *testing.T) {
	t0 := time.Unix(1_800_000_000, 0)
	pod := testPod("p", shell("a", "true"))
	pod.Spec.ActiveDeadlineSeconds = ptr.To[int64](20)
	pj := &podJob{pod: pod, job: &job{ID: 1, State: statePending}}
	if pj.reachedDeadline(t0.Add(time.Hour)) {
		t.Error("a pending job reached its deadline")
	}
	pj.job = &job{ID: 1, State: stateRunning, StartTime: t0.Unix()}
	if pj.reachedDeadline(t0.Add(19 * time.Second)) {
		t.Error("deadline reached 19s after the start of a 20s deadline")
	}
	if !pj.reachedDeadline(t0.Add(20*time.Second)) || !pj.pastDeadline {
		t.Error("deadline not reached 20s after the start")
	}
	if pj.reachedDeadline(t0.Add(21 * time.Second)) {
		t.Error("deadline reached twice: the job would be cancelled twice")
	}
	noDeadline := &podJob{pod: testPod("q", shell("a", "true")), job: &job{ID: 2, State: stateRunning, StartTime: t0.Unix()}}
	if noDeadline.reachedDeadline(t0.Add(24 * time.Hour)) {
		t.Error("a pod without activeDeadlineSeconds reached a deadline")
	}
}
