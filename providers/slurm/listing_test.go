package slurm

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/sirupsen/logrus"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// realListing is what Slurm 22.05's squeue printed for listNamed: a
// running job held after it started, a held pending job (no host, no
// start yet) and one that failed.
const realListing = "3|1001|FAILED|vk-slurm|1795911536|NonZeroExitCode\n" +
	"2|1001|PENDING|n/a|N/A|JobHeldUser\n" +
	"1|1001|RUNNING|vk-slurm|1795911534|JobHeldAdmin\n"

func TestParseListing(t *testing.T) {
	jobs, err := parseListing([]byte(realListing), "vk_n")
	if err != nil {
		t.Fatal(err)
	}
	want := []job{
		{ID: 3, UserID: 1001, Name: "vk_n", State: "FAILED", BatchHost: "vk-slurm", StartTime: 1795911536, Reason: "NonZeroExitCode", brief: true},
		{ID: 2, UserID: 1001, Name: "vk_n", State: statePending, StartTime: 0, Reason: "JobHeldUser", brief: true},
		{ID: 1, UserID: 1001, Name: "vk_n", State: stateRunning, BatchHost: "vk-slurm", StartTime: 1795911534, Reason: "JobHeldAdmin", brief: true},
	}
	if len(jobs) != len(want) {
		t.Fatalf("got %d jobs: %+v", len(jobs), jobs)
	}
	for i := range want {
		if jobs[i] != want[i] {
			t.Errorf("job %d: got %+v, want %+v", i, jobs[i], want[i])
		}
	}
	if jobs, err := parseListing(nil, "vk_n"); err != nil || len(jobs) != 0 {
		t.Errorf("no jobs: %+v, %v", jobs, err)
	}
	// A reason of Slurm's own words may hold blanks and '|'.
	if jobs, err := parseListing([]byte("7|5|PENDING|n/a|N/A|launch failed | requeued held\n"), "vk_n"); err != nil || jobs[0].Reason != "launch failed | requeued held" {
		t.Errorf("a reason with blanks: %+v, %v", jobs, err)
	}

	for _, tc := range []struct{ name, out, want string }{
		{"no final newline", "1|2|RUNNING|h|0|None", "line 1: the output does not end with a newline"},
		{"too few fields", "1|2|RUNNING|h|0\n", "line 1: 5 fields, want 6"},
		{"a line split by a newline", "1|2|RUNNING|h|0|None\n1|2\n", "line 2: 2 fields"},
		{"job twice", "1|2|RUNNING|h|0|None\n1|3|COMPLETED|h|0|None\n", "line 2: job 1 is listed twice"},
		{"array notation", "12_[1-3]|2|PENDING|n/a|N/A|None\n", `line 1: job ID "12_[1-3]" is not a positive number`},
		{"job 0", "0|2|RUNNING|h|0|None\n", `job ID "0"`},
		{"signed id", "+1|2|RUNNING|h|0|None\n", `job ID "+1"`},
		{"user name", "1|alice|RUNNING|h|0|None\n", `user ID "alice" is not a number`},
		{"uid past 32 bits", "1|4294967296|RUNNING|h|0|None\n", `user ID "4294967296"`},
		{"state", "1|2|running|h|0|None\n", `state "running" is not a Slurm job state`},
		{"control byte", "1|2|RUNNING|h|0|No\x1bne\n", "unprintable bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			jobs, err := parseListing([]byte(tc.out), "vk_n")
			var le *listingError
			if !errors.As(err, &le) || !strings.Contains(err.Error(), tc.want) || !strings.HasPrefix(err.Error(), "squeue --format ") {
				t.Errorf("got %+v, %v; want a listing error saying %q", jobs, err, tc.want)
			}
		})
	}
}

// TestListNamedAsks: the poll asks squeue for the node's jobs by name, in
// every state, with epoch times; a stand-in squeue records its argv and
// environment.
func TestListNamedAsks(t *testing.T) {
	bin := t.TempDir()
	script := "#!/bin/sh\nprintf '%s\\n' \"$@\" > " + bin + "/args\necho \"$SLURM_TIME_FORMAT\" > " + bin + "/tf\nprintf '5|1001|RUNNING|c1|1700000000|None\\n'\n"
	if err := os.WriteFile(filepath.Join(bin, "squeue"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	t.Setenv("SLURM_TIME_FORMAT", "standard")
	cli := newCLI(&Config{SlurmBin: bin})
	jobs, err := cli.listNamed(context.Background(), "vk_node1")
	if err != nil || len(jobs) != 1 || jobs[0].ID != 5 || jobs[0].Name != "vk_node1" || jobs[0].StartTime != 1700000000 {
		t.Fatalf("got %+v, %v", jobs, err)
	}
	args, _ := os.ReadFile(filepath.Join(bin, "args"))
	for _, want := range []string{"--name=vk_node1\n", "--states=all\n", "--all\n", "--noheader\n", "--format=" + listFormat + "\n"} {
		if !strings.Contains(string(args), want) {
			t.Errorf("squeue's argv lacks %q:\n%s", want, args)
		}
	}
	if tf, _ := os.ReadFile(filepath.Join(bin, "tf")); string(tf) != "%s\n" {
		t.Errorf("SLURM_TIME_FORMAT=%q, want %%s whatever the daemon's environment says", tf)
	}
	if len(cli.env) > 0 && strings.HasPrefix(cli.env[len(cli.env)-1], "SLURM_TIME_FORMAT=%s") {
		t.Errorf("listNamed changed the shared environment")
	}
}

// TestBriefJobIdentity: a job of the brief listing is the pod's by its ID
// (the caller's lookup), the node's name and the tenant's uid; another
// user's job with the pod's ID is not. Jobs named after the node that are
// no pod's are logged, but not while a submission of their user has not
// returned.
func TestBriefJobIdentity(t *testing.T) {
	p := &Provider{jobName: "vk_n", pods: map[string]*podJob{}, ignored: map[string]bool{}}
	ten := &tenant{uid: 1001}
	mine := job{ID: 12, UserID: 1001, Name: "vk_n", State: stateRunning, brief: true}
	if !p.owns(&mine, ten, "uid-1") {
		t.Error("the tenant's job by the node's name is not the pod's")
	}
	forged := mine
	forged.UserID = 1002
	if p.owns(&forged, ten, "uid-1") {
		t.Error("another user's job is the pod's")
	}
	renamed := mine
	renamed.Name = "other"
	if p.owns(&renamed, ten, "uid-1") {
		t.Error("a job of another name is the pod's")
	}

	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID("uid-1")}}
	p.pods["ns/p"] = &podJob{pod: pod, tenant: ten} // sbatch has not returned
	stranger := job{ID: 40, UserID: 1002, Name: "vk_n", State: stateRunning, brief: true}
	ctx := context.Background()
	p.logForged(ctx, []job{mine, stranger})
	if p.ignored["12"] || !p.ignored["40"] {
		t.Errorf("while the tenant's submission is out: ignored %v, want only job 40 (another user's)", p.ignored)
	}
	p.pods["ns/p"].jobID = "12"
	p.logForged(ctx, []job{mine, stranger, {ID: 41, UserID: 1001, Name: "vk_n", brief: true}})
	if p.ignored["12"] || !p.ignored["40"] || !p.ignored["41"] {
		t.Errorf("once it returned job 12: ignored %v, want 40 and 41", p.ignored)
	}
}

// TestForgottenPodsJobIsNotForged: Slurm lists a job for a while after it
// ended. Once its pod is forgotten the job is no pod's, but not a forged
// one: it is not logged; a forged job beside it is.
func TestForgottenPodsJobIsNotForged(t *testing.T) {
	var logged bytes.Buffer
	logger := logrus.New()
	logger.SetOutput(&logged)
	ctx := log.WithLogger(context.Background(), log.FromLogrus(logrus.NewEntry(logger)))
	p := &Provider{jobName: "vk_n", pods: map[string]*podJob{}, ignored: map[string]bool{}, cfg: &Config{StateDir: t.TempDir()}, tenancy: &tenancy{pinned: map[types.UID]*tenant{}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID("uid-1")}}
	pj := &podJob{pod: pod, tenant: &tenant{uid: 1001}, dir: t.TempDir(), jobID: "12"}
	p.pods["ns/p"] = pj
	p.forget("ns/p", pj)

	ended := job{ID: 12, UserID: 1001, Name: "vk_n", State: "COMPLETED", brief: true}
	forged := job{ID: 13, UserID: 1002, Name: "vk_n", State: stateRunning, brief: true}
	p.logForged(ctx, []job{ended, forged})
	if strings.Contains(logged.String(), "job 12 ") || !strings.Contains(logged.String(), "job 13 of user 1002") {
		t.Errorf("logged %q, want job 13 (forged) only", logged.String())
	}
	p.logForged(ctx, nil)
	if len(p.ignored) != 0 {
		t.Errorf("ignored %v once no job is listed, want none", p.ignored)
	}
}

// FuzzParseListing: whatever squeue prints (its reason and batch host are
// not the tenant's, but a parser must not trust that), parseListing does
// not panic; a refusal is a listingError; what it accepts is one job per
// line, each with a unique positive ID, the uid and state of its own line
// (no line speaks for another job), the node's name, printable fields, and
// a status a kubelet could report.
func FuzzParseListing(f *testing.F) {
	for _, seed := range []string{
		realListing,
		"",
		"7|5|PENDING|n/a|N/A|launch failed | requeued held\n",
		"1|2|RUNNING|h|0|None\n1|2\n",
		"1|2|RUNNING|h|0|None\n1|3|COMPLETED|h|0|None\n",
		"12_[1-3]|2|PENDING|n/a|N/A|None\n",
		"1|2|RUNNING|h|99999999999999|None\n",
		"1|2|RUNNING|h|-5|None",
	} {
		f.Add([]byte(seed))
	}
	pod := &corev1.Pod{}
	pod.Spec.Containers = []corev1.Container{{Name: "app", Image: "busybox"}}
	f.Fuzz(func(t *testing.T, out []byte) {
		jobs, err := parseListing(out, "vk_n")
		if err != nil {
			var le *listingError
			if !errors.As(err, &le) {
				t.Fatalf("not a listing error: %v", err)
			}
			return
		}
		text := strings.TrimSuffix(string(out), "\n")
		var lines []string
		if text != "" || len(out) > 0 {
			lines = strings.Split(text, "\n")
		}
		if len(jobs) != len(lines) {
			t.Fatalf("%d jobs from %d lines: %q", len(jobs), len(lines), out)
		}
		seen := map[uint64]bool{}
		for i := range jobs {
			j := &jobs[i]
			if j.ID == 0 || seen[j.ID] {
				t.Fatalf("job ID %d (zero or twice) accepted from %q", j.ID, out)
			}
			seen[j.ID] = true
			f := strings.SplitN(lines[i], "|", listFields)
			id, err1 := strconv.ParseUint(f[0], 10, 64)
			uid, err2 := strconv.ParseUint(f[1], 10, 32)
			if err1 != nil || err2 != nil || id != j.ID || uint32(uid) != j.UserID || f[2] != j.State || f[5] != j.Reason {
				t.Fatalf("job %+v is not line %d's: %q", j, i+1, lines[i])
			}
			if !j.brief || j.Name != "vk_n" || j.Comment != "" || !printable(j.BatchHost) || !printable(j.Reason) || strings.Contains(j.BatchHost, "|") {
				t.Fatalf("job %+v from %q", j, lines[i])
			}
			checkPodStatus(t, pod, j, jobDone(j.State), podStatus(pod, jobView{job: j, files: map[string]containerFiles{}}))
		}
	})
}

// TestForgottenPodsDirectoryIsRemoved: a read that forgets a pod whose job
// ended removes the pod's directory, once the provider's lock is released.
func TestForgottenPodsDirectoryIsRemoved(t *testing.T) {
	p := &Provider{jobName: "vk_n", pods: map[string]*podJob{}, ignored: map[string]bool{}, cfg: &Config{StateDir: t.TempDir()}, tenancy: &tenancy{pinned: map[types.UID]*tenant{}}}
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "p", UID: types.UID("uid-1")}}
	dir := filepath.Join(t.TempDir(), "uid-1")
	if err := os.MkdirAll(filepath.Join(dir, "c", "main"), 0o700); err != nil {
		t.Fatal(err)
	}
	pj := &podJob{pod: pod, tenant: &tenant{uid: 1001}, dir: dir, jobID: "12", listed: true, deleting: true}
	p.pods["ns/p"] = pj
	p.mu.Lock()
	r := p.beginRead("ns/p", pj, true)
	p.mu.Unlock()
	p.finishReads([]statusRead{r})
	if _, ok := p.pods["ns/p"]; ok {
		t.Error("the pod is still known once its read forgot it")
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the pod's directory after it was forgotten: %v, want it gone", err)
	}
	if len(p.forgotten) != 0 {
		t.Errorf("directories left to remove: %q", p.forgotten)
	}
}
