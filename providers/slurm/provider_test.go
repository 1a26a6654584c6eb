//go:build e2e

package slurm

import (
	"bytes"
	"context"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/uuid"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/volume"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// These tests drive the provider directly against a real Slurm (no API
// server): what each pod's job does and what the provider reports.

// recorder keeps the statuses the provider notifies.
type recorder struct {
	mu   sync.Mutex
	last map[string]*corev1.Pod
}

func (r *recorder) record(pod *corev1.Pod) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.last[pod.Namespace+"/"+pod.Name] = pod
}

// waitFor waits until the pod's last notified status satisfies cond.
func (r *recorder) waitFor(t *testing.T, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	err := wait.PollUntilContextTimeout(context.Background(), 100*time.Millisecond, 2*time.Minute, true, func(context.Context) (bool, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		pod = r.last["ns/"+name]
		return pod != nil && cond(pod), nil
	})
	if err != nil {
		t.Fatalf("pod %s %s: %v (last: %+v)", name, what, err, pod)
	}
	return pod
}

// tenantA is the tenant of the tests' namespace "ns": jobs run as
// vk-tenant-a (hack/slurm/slurm.sh install adds it).
const tenantA = "tenants: [{namespaces: [ns], user: vk-tenant-a}]\n"

func writeConfig(t *testing.T, conf, extra string) string {
	t.Helper()
	dir := t.TempDir()
	// The tenant's jobs pass through to the work directory.
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o711); err != nil {
			t.Fatal(err)
		}
	}
	path := filepath.Join(dir, "slurm.yaml")
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	// This test binary is the launcher too (see TestMain).
	data := fmt.Sprintf("workDir: %s\nslurmConf: %s\nlauncher: %s\npollInterval: 200ms\nimages:\n  busybox: {host: true}\n%s%s", filepath.Join(dir, "work"), conf, self, tenantA, extra)
	if err := os.WriteFile(path, []byte(data), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// newProvider starts a provider for a new node name against the package's
// Slurm; its poll loop stops when the test ends.
func newProvider(t *testing.T, configPath string) (*Provider, *recorder) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	prov, err := New(ctx, provider.InitConfig{ConfigPath: configPath, NodeName: "vk-" + string(uuid.NewUUID())[:8], InternalIP: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	p := prov.(*Provider)
	r := &recorder{last: map[string]*corev1.Pod{}}
	p.NotifyPods(ctx, r.record)
	return p, r
}

func terminated(name string) func(*corev1.Pod) bool {
	return func(p *corev1.Pod) bool {
		for _, s := range p.Status.ContainerStatuses {
			if s.Name == name {
				return s.State.Terminated != nil
			}
		}
		return false
	}
}

func exitCode(p *corev1.Pod, name string) int32 {
	for _, s := range append(p.Status.InitContainerStatuses, p.Status.ContainerStatuses...) {
		if s.Name == name && s.State.Terminated != nil {
			return s.State.Terminated.ExitCode
		}
	}
	return -1
}

func readLog(t *testing.T, p *Provider, pod, container string, opts api.ContainerLogOpts) string {
	t.Helper()
	rc, err := p.GetContainerLogs(context.Background(), "ns", pod, container, opts)
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, err := io.ReadAll(rc)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// jobsOf counts the jobs Slurm lists for the pod.
func jobsOf(t *testing.T, p *Provider, uid types.UID) int {
	t.Helper()
	jobs, err := p.cli.squeue(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, j := range jobs {
		if j.Comment == jobComment(uid) {
			n++
		}
	}
	return n
}

// TestPodRunsAsJob: a pod with an init container, a volume and env runs as
// one job; the init container runs first, the main container sees the
// volume's file and the env, shell metacharacters in args stay literal,
// the exit code comes back, and a second CreatePod submits nothing.
func TestPodRunsAsJob(t *testing.T) {
	p, r := newProvider(t, writeConfig(t, localSlurm(t), ""))
	ctx := context.Background()
	attack := "$(touch /tmp/vk-slurm-pwned);`touch /tmp/vk-slurm-pwned`;x"
	pod := testPod("job",
		corev1.Container{Name: "main", Image: "busybox", Command: []string{"sh", "-c", `cat /etc/cfg/x; echo "env=$GREETING"; cat /data/init; echo "arg=$1"; exit 3`, "sh", attack},
			Env:          []corev1.EnvVar{{Name: "GREETING", Value: "hi; there"}},
			VolumeMounts: []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}, {Name: "data", MountPath: "/data"}}},
	)
	pod.Spec.InitContainers = []corev1.Container{{Name: "init", Image: "busybox", Command: []string{"sh", "-c", "echo from-init > /data/init"},
		VolumeMounts: []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}}}
	pod.Spec.Volumes = []corev1.Volume{
		{Name: "cfg", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "cfg"}}}},
		{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
	}
	err := p.SetPodVolumes(ctx, pod, &volume.Contents{Volumes: []volume.Volume{{Name: "cfg", Files: []volume.File{{Path: "x", Data: "config-x\n", Mode: 0o644}}}}})
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := p.CreatePod(ctx, pod.DeepCopy()); err != nil {
		t.Fatal(err)
	}
	got := r.waitFor(t, "job", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if c := exitCode(got, "main"); c != 3 {
		out, _ := os.ReadFile(filepath.Join(p.podDir(pod), "job.out"))
		t.Errorf("main exit code %d, want 3; the job's output:\n%s", c, out)
	}
	if c := exitCode(got, "init"); c != 0 {
		t.Errorf("init exit code %d, want 0", c)
	}
	want := "config-x\nenv=hi; there\nfrom-init\narg=" + attack + "\n"
	if log := readLog(t, p, "job", "main", api.ContainerLogOpts{Tail: -1}); log != want {
		t.Errorf("log %q, want %q", log, want)
	}
	if log := readLog(t, p, "job", "main", api.ContainerLogOpts{Tail: 1}); log != "arg="+attack+"\n" {
		t.Errorf("tail 1: %q", log)
	}
	if _, err := os.Stat("/tmp/vk-slurm-pwned"); err == nil {
		t.Error("an argument was run as shell: /tmp/vk-slurm-pwned exists")
	}
	if n := jobsOf(t, p, pod.UID); n != 1 {
		t.Errorf("%d jobs for the pod, want 1", n)
	}
}

// execIO is an AttachIO with output only.
type execIO struct{ out, errb bytes.Buffer }

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

func (e *execIO) Stdin() io.Reader            { return nil }
func (e *execIO) Stdout() io.WriteCloser      { return nopCloser{&e.out} }
func (e *execIO) Stderr() io.WriteCloser      { return nopCloser{&e.errb} }
func (e *execIO) TTY() bool                   { return false }
func (e *execIO) Resize() <-chan api.TermSize { return nil }

// TestExecAndGracefulDelete: exec runs in the container's mount view (its
// volume is there, the work directory with other pods' files is not);
// deleting the pod sends TERM to the container, whose trap runs, and the job
// then ends; a second pod, deleted with no grace, is cancelled at once.
func TestExecAndGracefulDelete(t *testing.T) {
	p, r := newProvider(t, writeConfig(t, localSlurm(t), ""))
	ctx := context.Background()
	pod := testPod("term", shell("main", `trap 'echo got-term; exit 7' TERM; echo ready; while :; do sleep 0.1; done`))
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "cfg", MountPath: "/etc/cfg"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "cfg", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
	if err := p.SetPodVolumes(ctx, pod, &volume.Contents{Volumes: []volume.Volume{{Name: "cfg", Files: []volume.File{{Path: "x", Data: "secret-x", Mode: 0o600}}}}}); err != nil {
		t.Fatal(err)
	}
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "term", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	// The trap is set once "ready" is printed.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return strings.Contains(readLog(t, p, "term", "main", api.ContainerLogOpts{Tail: -1}), "ready"), nil
	}); err != nil {
		t.Fatal("the container never printed ready")
	}
	session := &execIO{}
	if err := p.RunInContainer(ctx, "ns", "term", "main", []string{"cat", "/etc/cfg/x"}, session); err != nil || session.out.String() != "secret-x" {
		t.Errorf("exec cat /etc/cfg/x: %v, out %q err %q", err, session.out.String(), session.errb.String())
	}
	// The attack: read the pod's secret from the work directory, where
	// every pod's files are; the container does not see it.
	session = &execIO{}
	secret := filepath.Join(p.podDir(pod), "vol", "cfg", "x")
	if err := p.RunInContainer(ctx, "ns", "term", "main", []string{"ls", "-A", p.cfg.WorkDir}, session); err == nil || session.out.String() != "" {
		t.Errorf("ls the work directory: %v, out %q, want it missing", err, session.out.String())
	}
	session = &execIO{}
	if err := p.RunInContainer(ctx, "ns", "term", "main", []string{"cat", secret}, session); err == nil || strings.Contains(session.out.String(), "secret-x") {
		t.Errorf("cat %s through the work directory: %v, out %q", secret, err, session.out.String())
	}
	session = &execIO{}
	if err := p.RunInContainer(ctx, "ns", "term", "main", []string{"sh", "-c", "exit 4"}, session); err == nil || !strings.Contains(err.Error(), "exit code 4") {
		t.Errorf("exec exit 4: %v", err)
	}

	del := pod.DeepCopy()
	del.DeletionGracePeriodSeconds = ptr.To[int64](60)
	start := time.Now()
	if err := p.DeletePod(ctx, del); err != nil {
		t.Fatal(err)
	}
	got := r.waitFor(t, "term", "terminated", terminated("main"))
	if c := exitCode(got, "main"); c != 7 {
		t.Errorf("exit code %d after a graceful delete, want 7 (the TERM trap's)", c)
	}
	if took := time.Since(start); took > 50*time.Second {
		t.Errorf("the job outlived its TERM trap: %s", took)
	}

	force := testPod("force", shell("main", `trap '' TERM; while :; do sleep 0.1; done`))
	if err := p.CreatePod(ctx, force); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "force", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	info, err := os.ReadFile(filepath.Join(p.podDir(force), "c", "main", "info"))
	m := childPID.FindSubmatch(info)
	if err != nil || m == nil {
		t.Fatalf("the force pod's container pid: %v %q", err, info)
	}
	pid, _ := strconv.Atoi(string(m[1]))
	del = force.DeepCopy()
	del.DeletionGracePeriodSeconds = ptr.To[int64](0)
	if err := p.DeletePod(ctx, del); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "force", "terminated", terminated("main"))
	// The job's state says cancelled before Slurm has killed the process
	// that ignores TERM (KillWait later): the test's Slurm must not stop
	// before then, or the process outlives it.
	if err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(context.Context) (bool, error) {
		return syscall.Kill(pid, 0) == syscall.ESRCH, nil
	}); err != nil {
		t.Errorf("the force-deleted container's process %d still runs", pid)
	}
}

// TestLogRotation: a container writing far more than the log bounds leaves
// at most containerLogMaxFiles files of containerLogMaxSize on disk, and
// its log still ends with its newest lines.
func TestLogRotation(t *testing.T) {
	p, r := newProvider(t, writeConfig(t, localSlurm(t), "containerLogMaxSize: 1Mi\ncontainerLogMaxFiles: 3\n"))
	pod := testPod("loud", shell("main", `yes 0123456789abcdef0123456789abcdef | head -c 40000000; echo; echo the-end`))
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	r.waitFor(t, "loud", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	files, err := filepath.Glob(filepath.Join(p.podDir(pod), "c", "main", "log*"))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range files {
		st, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		total += st.Size()
	}
	// Three files of 1 MiB, the last record of each past the bound.
	if len(files) > 3 || total > 3<<20+3*200<<10 {
		t.Errorf("%d log files, %d bytes on disk, want at most 3 files of about 1 MiB", len(files), total)
	}
	if log := readLog(t, p, "loud", "main", api.ContainerLogOpts{Tail: 1}); log != "the-end\n" {
		t.Errorf("the log's last line %q, want the-end", log)
	}
}

// TestEmptyDirSizeLimitEvicts: a pod writing past its emptyDir's sizeLimit
// is evicted, as the kubelet evicts it: Failed, Evicted, naming the volume.
func TestEmptyDirSizeLimitEvicts(t *testing.T) {
	p, r := newProvider(t, writeConfig(t, localSlurm(t), ""))
	pod := testPod("full", shell("main", `head -c 5000000 /dev/zero > /data/fill; sleep 3600`))
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	limit := resource.MustParse("1Mi")
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	got := r.waitFor(t, "full", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if got.Status.Reason != "Evicted" || !strings.Contains(got.Status.Message, `EmptyDir volume "data" exceeds the limit "1Mi"`) {
		t.Errorf("reason %q message %q, want Evicted naming the volume", got.Status.Reason, got.Status.Message)
	}
}

// The package's tests share one Slurm on loopback (hack/slurm/slurm.sh),
// started by the first test that needs it and stopped after the last.
var (
	slurmOnce sync.Once
	slurmConf string
	slurmDir  string
	slurmErr  error
)

// slurmScript is hack/slurm/slurm.sh of this checkout.
func slurmScript() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Join(filepath.Dir(file), "..", "..", "hack", "slurm", "slurm.sh")
}

// localSlurm returns the SLURM_CONF of the package's Slurm, starting it
// (and installing Debian's packages) the first time.
func localSlurm(t *testing.T) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("hack/slurm/slurm.sh runs Slurm as root")
	}
	slurmOnce.Do(func() {
		var ports [2]int
		for i := range ports {
			if ports[i], slurmErr = freeport.Next(); slurmErr != nil {
				return
			}
		}
		if slurmDir, slurmErr = os.MkdirTemp("", "vk-slurm-"); slurmErr != nil {
			return
		}
		teardown = append(teardown, func() {
			_ = exec.Command(slurmScript(), "stop", slurmDir).Run()
			_ = os.RemoveAll(slurmDir)
		})
		cmd := exec.Command(slurmScript(), "start", slurmDir)
		cmd.Env = append(os.Environ(), "SLURMCTLD_PORT="+strconv.Itoa(ports[0]), "SLURMD_PORT="+strconv.Itoa(ports[1]))
		if out, err := cmd.CombinedOutput(); err != nil {
			slurmErr = fmt.Errorf("%v: %s", err, out)
			return
		}
		slurmConf = filepath.Join(slurmDir, "slurm.conf")
	})
	if slurmErr != nil {
		t.Fatalf("starting Slurm: %v", slurmErr)
	}
	return slurmConf
}
