package slurm

import (
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
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

	p.reportFromFiles()
	if len(notified) != 1 || notified[0].Name != "deleted" || notified[0].Status.Phase != corev1.PodFailed {
		t.Fatalf("notified %d pods (%v), want the deleted pod Failed from its exit file", len(notified), notified)
	}
	if cs := notified[0].Status.ContainerStatuses[0].State.Terminated; cs == nil || cs.ExitCode != 143 {
		t.Errorf("container state %+v, want terminated with the exit file's 143", notified[0].Status.ContainerStatuses[0].State)
	}
	if p.pods["ns/deleted"] != deleted {
		t.Error("the pod was forgotten before a listing showed its job ended")
	}
	p.reportFromFiles()
	if len(notified) != 1 {
		t.Errorf("a terminal pod was reported again: %d notifications", len(notified))
	}
}

// TestReportStartingFromFiles: a pod whose job the last listing saw
// RUNNING is reported Running as soon as its container's files say it
// started, without a listing; a pod whose job was listed PENDING is not,
// whatever files it has (a requeued job's are from its last run).
func TestReportStartingFromFiles(t *testing.T) {
	var notified []*corev1.Pod
	p := &Provider{pods: map[string]*podJob{}, notify: func(pod *corev1.Pod) { notified = append(notified, pod) }}
	newPod := func(name string, j *job) (*podJob, string) {
		dir := t.TempDir()
		c := filepath.Join(dir, "c", "main")
		if err := os.MkdirAll(c, 0o700); err != nil {
			t.Fatal(err)
		}
		pj := &podJob{pod: testPod(name, shell("main", "sleep 1")), dir: dir, jobID: "7", job: j, listed: true}
		pj.status = podStatus(pj.pod, p.view(pj))
		if pj.status.Phase != corev1.PodPending {
			t.Fatalf("%s before its container started: phase %s, want Pending", name, pj.status.Phase)
		}
		p.pods["ns/"+name] = pj
		return pj, filepath.Join(c, "info")
	}
	started, info := newPod("started", &job{ID: 7, State: stateRunning, StartTime: 1700000000})
	_, pendingInfo := newPod("pending", &job{ID: 8, State: statePending})

	p.reportFromFiles()
	if len(notified) != 0 {
		t.Fatalf("notified %v before any container started", notified)
	}
	for _, path := range []string{info, pendingInfo} {
		if err := os.WriteFile(path, []byte(`{"child-pid": 5}`), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p.reportFromFiles()
	if len(notified) != 1 || notified[0].Name != "started" || notified[0].Status.Phase != corev1.PodRunning {
		t.Fatalf("notified %d pods (%v), want the listed-RUNNING pod Running from its files", len(notified), notified)
	}
	if started.watchedByFiles() {
		t.Error("a Running pod not being deleted is still read between listings")
	}
	p.reportFromFiles()
	if len(notified) != 1 {
		t.Errorf("%d notifications, want no more: the pending job's pod waits for a listing", len(notified))
	}
}

// TestStaleReadIsNotApplied: status reads read the pods' files without
// the provider's lock, so two may finish out of order. The later read's
// status stands; a read that forgets the pod (its job ended while it was
// being deleted) still forgets it when a later read was applied first.
func TestStaleReadIsNotApplied(t *testing.T) {
	var notified []*corev1.Pod
	p := &Provider{pods: map[string]*podJob{}, ignored: map[string]bool{}, cfg: &Config{StateDir: t.TempDir()}, tenancy: &tenancy{pinned: map[types.UID]*tenant{}},
		notify: func(pod *corev1.Pod) { notified = append(notified, pod) }}
	dir := t.TempDir()
	info := filepath.Join(dir, "c", "main", "info")
	if err := os.MkdirAll(filepath.Dir(info), 0o700); err != nil {
		t.Fatal(err)
	}
	pj := &podJob{pod: testPod("p", shell("main", "sleep 1")), dir: dir, jobID: "7", job: &job{ID: 7, State: stateRunning, StartTime: 1700000000}, listed: true}
	p.pods["ns/p"] = pj

	older := p.beginRead("ns/p", pj, false)
	older.readFiles() // before the container started: Pending
	if err := os.WriteFile(info, []byte(`{"child-pid": 5}`), 0o600); err != nil {
		t.Fatal(err)
	}
	newer := p.beginRead("ns/p", pj, false)
	newer.readFiles()
	p.apply(newer)
	p.apply(older)
	if pj.status.Phase != corev1.PodRunning || len(notified) != 1 {
		t.Fatalf("phase %s after %d notifications, want Running once: the older read was applied over the newer", pj.status.Phase, len(notified))
	}

	pj.deleting = true
	ending := p.beginRead("ns/p", pj, true)
	ending.readFiles()
	later := p.beginRead("ns/p", pj, false)
	later.readFiles()
	p.apply(later)
	p.apply(ending)
	if _, ok := p.pods["ns/p"]; ok {
		t.Error("the pod whose job ended is still known: its forgetting read was dropped as stale")
	}
	if !p.ignored["7"] {
		t.Error("the forgotten pod's job is not among the ignored ones")
	}
}
