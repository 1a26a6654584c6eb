package slurm

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// TestReportStoppingFromExitFiles: a deleted pod whose containers have
// exited on the TERM is reported terminal from its exit files while its
// job is still listed RUNNING, without a listing; it stays known until a
// listing shows the job ended. A pod not being deleted waits for the poll.
func TestReportStoppingFromExitFiles(t *testing.T) {
	var notified []*corev1.Pod
	p := &Provider{pods: map[string]*podJob{}, notify: func(pod *corev1.Pod) { notified = append(notified, pod) }}
	running := &job{ID: 7, State: stateRunning, StartTime: 1700000000}
	newPod := func(name string, deleting bool) *podJob {
		dir := t.TempDir()
		c := filepath.Join(dir, "c", "main")
		if err := os.MkdirAll(c, 0o700); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(c, "info"), []byte(`{"child-pid": 5}`), 0o600); err != nil {
			t.Fatal(err)
		}
		pj := &podJob{pod: testPod(name, shell("main", "sleep 1")), dir: dir, jobID: "7", job: running, listed: true, deleting: deleting}
		pj.status = podStatus(pj.pod, p.view(pj))
		if pj.status.Phase != corev1.PodRunning {
			t.Fatalf("before the exit file: phase %s, want Running", pj.status.Phase)
		}
		if err := os.WriteFile(filepath.Join(c, "exit"), []byte("143\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		p.pods["ns/"+name] = pj
		return pj
	}
	deleted := newPod("deleted", true)
	newPod("other", false)

	p.reportStopping()
	if len(notified) != 1 || notified[0].Name != "deleted" || notified[0].Status.Phase != corev1.PodFailed {
		t.Fatalf("notified %d pods (%v), want the deleted pod Failed from its exit file", len(notified), notified)
	}
	if cs := notified[0].Status.ContainerStatuses[0].State.Terminated; cs == nil || cs.ExitCode != 143 {
		t.Errorf("container state %+v, want terminated with the exit file's 143", notified[0].Status.ContainerStatuses[0].State)
	}
	if p.pods["ns/deleted"] != deleted {
		t.Error("the pod was forgotten before a listing showed its job ended")
	}
	p.reportStopping()
	if len(notified) != 1 {
		t.Errorf("a terminal pod was reported again: %d notifications", len(notified))
	}
}
