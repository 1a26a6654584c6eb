package slurm

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	k8srecord "k8s.io/client-go/tools/record"
)

// TestHeldJobIsThePodsReason: a pending job Slurm holds leaves the pod
// Pending with reason SlurmJobHeld, on the pod and its waiting containers,
// and a message naming the job, Slurm's reason and what releases it; a job
// pending for resources does not.
func TestHeldJobIsThePodsReason(t *testing.T) {
	pod := testPod("p", shell("a", "true"))
	for _, tc := range []struct {
		reason string
		held   bool
		says   string
	}{
		{"launch_failed_requeued_held", true, "launch on a node failed"},
		{"JobHeldAdmin", true, "held by an administrator"},
		{"JobHeldUser", true, "held by its user"},
		{"job_requeued_in_held_state", true, "scontrol release 42"},
		{"Resources", false, ""},
		{"Priority", false, ""},
	} {
		s := podStatus(pod, jobView{job: &job{ID: 42, State: statePending, Reason: tc.reason}})
		w := s.ContainerStatuses[0].State.Waiting
		if s.Phase != corev1.PodPending || w == nil {
			t.Fatalf("%s: phase %s, container %+v; want Pending and waiting", tc.reason, s.Phase, s.ContainerStatuses[0].State)
		}
		if !tc.held {
			if s.Reason != "" || w.Reason != "ContainerCreating" || !strings.Contains(w.Message, tc.reason) {
				t.Errorf("%s: reason %q, container %+v; want no pod reason and ContainerCreating naming it", tc.reason, s.Reason, w)
			}
			continue
		}
		if s.Reason != ReasonJobHeld || w.Reason != ReasonJobHeld {
			t.Errorf("%s: pod reason %q, container reason %q; want %s", tc.reason, s.Reason, w.Reason, ReasonJobHeld)
		}
		for _, m := range []string{s.Message, w.Message} {
			if !strings.Contains(m, "job 42 ("+tc.reason+")") || !strings.Contains(m, tc.says) || !strings.Contains(m, "scontrol release 42") {
				t.Errorf("%s: message %q, want the job, its reason, %q and the release", tc.reason, m, tc.says)
			}
		}
	}
}

// TestHeldJobRecordsOneEvent: the hold is a Warning Event once, when it
// begins, not at every poll; a job released and held again gets another.
func TestHeldJobRecordsOneEvent(t *testing.T) {
	events := k8srecord.NewFakeRecorder(10)
	pj := &podJob{pod: testPod("p", shell("a", "true")), dir: t.TempDir(), listed: true}
	p := &Provider{events: events, pods: map[string]*podJob{"ns/p": pj}}
	for _, state := range []struct{ state, reason string }{
		{statePending, "Priority"},
		{statePending, "launch_failed_requeued_held"},
		{statePending, "launch_failed_requeued_held"},
		{statePending, "Resources"},
		{statePending, "JobHeldAdmin"},
	} {
		pj.job = &job{ID: 7, State: state.state, Reason: state.reason}
		p.report("ns/p", pj)
	}
	close(events.Events)
	var got []string
	for e := range events.Events {
		got = append(got, e)
	}
	if len(got) != 2 || !strings.HasPrefix(got[0], "Warning SlurmJobHeld Slurm holds job 7 (launch_failed_requeued_held)") ||
		!strings.HasPrefix(got[1], "Warning SlurmJobHeld Slurm holds job 7 (JobHeldAdmin)") {
		t.Errorf("events %q, want one per hold", got)
	}
}
