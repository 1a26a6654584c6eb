package slurm

import (
	"context"
	"encoding/json"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/fuzzconfig"
)

// FuzzLoadConfig: whatever the provider config file holds, LoadConfig does
// not panic; a refusal names the file and the field; an accepted config has
// absolute, clean paths, a poll interval of at least 100ms, images of
// exactly one kind and a capacity that parses, and written back loads the
// same.
func FuzzLoadConfig(f *testing.F) {
	fuzzconfig.Fuzz(f, []string{
		"workDir: /shared/vk\nimages: {busybox: {host: true}}\n",
		"partition: batch\naccount: physics\nqos: normal\nuser: vkjobs\nworkDir: /shared/vk/\nslurmBin: /usr/bin\nslurmConf: /etc/slurm/slurm.conf\n" +
			"bwrap: /usr/bin/bwrap\npollInterval: 2s\nimages: {busybox: {host: true}, \"python:3.12\": {prefix: [/opt/py312/bin/python3]}, \"debian:12\": {root: /srv/images/debian12}}\n" +
			"capacity: {cpu: \"64\", memory: 256Gi, pods: \"500\"}\n",
		"workDir: relative\nimages: {busybox: {host: true}}\n",
		"workDir: /w\nimages: {}\n",
		"workDir: /w\nimages: {busybox: {host: true, root: /r}}\n",
		"workDir: /w\nimages: {busybox: {root: r}}\n",
		"workDir: /w\npartition: \"-a\"\nimages: {busybox: {host: true}}\n",
		"workDir: /w\npollInterval: 1ms\nimages: {busybox: {host: true}}\n",
		"workDir: /w\nimages: {busybox: {host: true}}\ncapacity: {cpu: \"-1\"}\n",
		"workDir: /w\nslurmBin: bin\nimages: {busybox: {host: true}}\n",
		"workDir: [",
		"",
	}, LoadConfig, func(t *testing.T, cfg *Config) {
		for field, p := range map[string]string{"workDir": cfg.WorkDir, "slurmBin": cfg.SlurmBin, "bwrap": cfg.Bwrap} {
			if !filepath.IsAbs(p) || field == "workDir" && filepath.Clean(p) != p {
				t.Fatalf("%s %q accepted", field, p)
			}
		}
		if cfg.poll < 100*time.Millisecond {
			t.Fatalf("poll interval %s accepted", cfg.poll)
		}
		for name, img := range cfg.Images {
			if kinds := btoi(img.Host) + btoi(len(img.Prefix) > 0) + btoi(img.Root != ""); kinds != 1 || img.Root != "" && !filepath.IsAbs(img.Root) {
				t.Fatalf("image %q accepted as %+v", name, img)
			}
		}
		for name, q := range cfg.capacity() {
			if q.Sign() < 0 {
				t.Fatalf("capacity %s is negative: %s", name, q.String())
			}
		}
	})
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}

// knownPodPhases are the phases of core/v1.
var knownPodPhases = map[corev1.PodPhase]bool{
	corev1.PodPending: true, corev1.PodRunning: true, corev1.PodSucceeded: true, corev1.PodFailed: true,
}

// FuzzSqueueStatus: whatever squeue --json prints, decoding it as squeue()
// does and computing a pod's status from a job it lists does not panic, and
// the status is one a kubelet could report: a known phase, one state per
// container, a final phase once the job is done or gone, Succeeded only
// with every container exited 0, Running only while the job runs, and
// times the API server can read back.
//
// squeue() runs the command and decodes in one; the decoding here is its
// own (the same response type), so the target stays thin.
func FuzzSqueueStatus(f *testing.F) {
	for _, seed := range []string{
		`{"jobs": [{"job_id": 12, "name": "vk-x", "comment": "vk-pod:uid", "job_state": "RUNNING", "batch_host": "c1", "start_time": 1700000000, "exit_code": 0, "standard_output": "/w/uid/job.out"}], "errors": []}`,
		`{"jobs": [{"job_id": 13, "job_state": "PENDING", "state_reason": "Resources"}]}`,
		`{"jobs": [{"job_id": 14, "job_state": "COMPLETED", "start_time": 1700000000}]}`,
		`{"jobs": [{"job_id": 15, "job_state": "TIMEOUT"}, {"job_id": 16, "job_state": "OUT_OF_MEMORY"}, {"job_id": 17, "job_state": "CANCELLED"}]}`,
		`{"jobs": [{"job_id": 18, "job_state": "PREEMPTED"}, {"job_id": 19, "job_state": ""}, {"job_id": 20, "job_state": "DEADLINE"}]}`,
		`{"jobs": [], "errors": [{"error": "slurmctld down"}]}`,
		`{"jobs": [{"job_id": -1}]}`,
		`[`,
	} {
		f.Add([]byte(seed), false, false, true, true, int32(0))
	}
	f.Add([]byte(`{"jobs": [{"job_id": 12, "job_state": "COMPLETED"}]}`), true, false, true, false, int32(3))
	f.Add([]byte(`{"jobs": [{"job_id": 12, "job_state": "RUNNING"}]}`), false, true, true, true, int32(-1))
	f.Fuzz(func(t *testing.T, data []byte, gone, pastDeadline, started, finished bool, exitCode int32) {
		var resp struct {
			Jobs   []job `json:"jobs"`
			Errors []any `json:"errors"`
		}
		if json.Unmarshal(data, &resp) != nil || len(resp.Errors) > 0 {
			return
		}
		pod := &corev1.Pod{}
		pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox"}}
		pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "busybox"}, {Name: "side", Image: "busybox"}}
		files := map[string]containerFiles{"init": {started: time.Unix(1, 0), finished: time.Unix(2, 0)}}
		if started {
			app := containerFiles{started: time.Unix(3, 0)}
			if finished {
				app.finished, app.exitCode = time.Unix(4, 0), int(exitCode)
			}
			files["app"] = app
		}
		for i := range resp.Jobs {
			j := &resp.Jobs[i]
			if id, err := strconv.ParseUint(j.jobID(), 10, 64); err != nil || id != j.ID {
				t.Fatalf("job id %d reads back as %q", j.ID, j.jobID())
			}
			s := podStatus(pod, jobView{gone: gone, pastDeadline: pastDeadline, job: j, files: files})
			checkPodStatus(t, pod, j, gone || pastDeadline || jobDone(j.State), s)
		}
		// A job squeue no longer lists.
		checkPodStatus(t, pod, &job{}, true, podStatus(pod, jobView{gone: true, files: files}))
	})
}

// checkPodStatus checks the status podStatus computed for pod from job j.
func checkPodStatus(t *testing.T, pod *corev1.Pod, j *job, done bool, s corev1.PodStatus) {
	t.Helper()
	if !knownPodPhases[s.Phase] {
		t.Fatalf("job %+v: phase %q", j, s.Phase)
	}
	if done && s.Phase != corev1.PodSucceeded && s.Phase != corev1.PodFailed {
		t.Fatalf("job %+v is over, the pod is %s", j, s.Phase)
	}
	if s.Phase == corev1.PodRunning && j.State != stateRunning {
		t.Fatalf("job %+v is not running, the pod is", j)
	}
	if len(s.InitContainerStatuses) != len(pod.Spec.InitContainers) || len(s.ContainerStatuses) != len(pod.Spec.Containers) {
		t.Fatalf("job %+v: %d init and %d container statuses", j, len(s.InitContainerStatuses), len(s.ContainerStatuses))
	}
	for _, cs := range append(s.InitContainerStatuses, s.ContainerStatuses...) {
		st := cs.State
		if n := btoi(st.Waiting != nil) + btoi(st.Running != nil) + btoi(st.Terminated != nil); n != 1 {
			t.Fatalf("job %+v: container %s has %d states", j, cs.Name, n)
		}
		if s.Phase == corev1.PodSucceeded && (st.Terminated == nil || st.Terminated.ExitCode != 0) {
			t.Fatalf("job %+v: the pod Succeeded with container %s %+v", j, cs.Name, st)
		}
	}
	// The API server reads times back from RFC 3339, years 0-9999.
	if s.StartTime != nil {
		data, err := json.Marshal(s.StartTime)
		var back metav1.Time
		if err == nil {
			err = json.Unmarshal(data, &back)
		}
		if err != nil || !back.Equal(s.StartTime) {
			t.Fatalf("job %+v: start time %s does not read back (%s): %v", j, s.StartTime, data, err)
		}
	}
}

// FuzzSinfoCapacity: whatever sinfo --json prints, the capacity summed from
// it has no negative quantity. The real sinfo() runs here, with a stand-in
// sinfo command that prints the fuzzer's bytes.
func FuzzSinfoCapacity(f *testing.F) {
	for _, seed := range []string{
		`{"nodes": [{"name": "c1", "address": "10.0.0.1", "cpus": 8, "real_memory": 16000}, {"name": "c2", "cpus": 4, "real_memory": 8000}]}`,
		`{"nodes": []}`,
		`{"nodes": [{"cpus": "8"}]}`,
		`{}`,
		``,
	} {
		f.Add([]byte(seed))
	}
	bin := f.TempDir()
	out := filepath.Join(bin, "sinfo.json")
	script := "#!/bin/sh\nexec cat " + out + "\n"
	if err := os.WriteFile(filepath.Join(bin, "sinfo"), []byte(script), 0o755); err != nil {
		f.Fatal(err)
	}
	p := &Provider{cli: newCLI(&Config{SlurmBin: bin})}
	f.Fuzz(func(t *testing.T, data []byte) {
		if err := os.WriteFile(out, data, 0o600); err != nil {
			t.Fatal(err)
		}
		capacity, err := p.sinfoCapacity(context.Background())
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sinfo --json: ") {
				t.Fatalf("the error does not name sinfo --json: %v", err)
			}
			return
		}
		for name, q := range capacity {
			if q.Sign() < 0 {
				t.Fatalf("capacity %s from sinfo is negative: %s", name, q.String())
			}
		}
	})
}

// FuzzParseSstat: whatever sstat prints, parseSstat does not panic; a
// refusal names the line or the step; what it accepts has no negative CPU
// time and, for one step, the CPU time and memory the line says.
func FuzzParseSstat(f *testing.F) {
	for _, seed := range []string{
		"12.batch|cpu=00:00:01,mem=1808K,energy=0\n12.0|cpu=1-02:03:04.500,mem=1.5M\n13.extern|cpu=00:00,mem=0\n",
		"12.batch|cpu=59:59.999,mem=2G",
		"12.batch|cpu=00:60,mem=1K",
		"12.batch|cpu=-1-00:00:00",
		"12.batch|mem=1E",
		"no separator",
		"",
	} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, out string) {
		usage, err := parseSstat(out)
		if err != nil {
			if !strings.HasPrefix(err.Error(), "sstat: ") {
				t.Fatalf("the error does not name sstat: %v", err)
			}
			return
		}
		for id, u := range usage {
			if u.cpu < 0 {
				t.Fatalf("job %q: negative CPU time %s from %q", id, u.cpu, out)
			}
		}
		// One step with one mem figure: the figure is the line's.
		line := strings.TrimSpace(out)
		step, tres, _ := strings.Cut(line, "|")
		var mems []string
		for _, kv := range strings.Split(tres, ",") {
			if k, v, _ := strings.Cut(kv, "="); k == "mem" {
				mems = append(mems, v)
			}
		}
		if strings.Contains(line, "\n") || len(mems) != 1 {
			return
		}
		v, mult := mems[0], 1.0
		if n := len(v); n > 0 && strings.IndexByte("KMGTP", v[n-1]) >= 0 {
			mult, v = math.Pow(1024, float64(strings.IndexByte("KMGTP", v[n-1])+1)), v[:n-1]
		}
		want, _ := strconv.ParseFloat(v, 64)
		want *= mult
		id, _, _ := strings.Cut(step, ".")
		if got := float64(usage[id].memory); math.Abs(got-want) > 1+want*1e-9 {
			t.Fatalf("mem=%s read as %d bytes", mems[0], usage[id].memory)
		}
	})
}
