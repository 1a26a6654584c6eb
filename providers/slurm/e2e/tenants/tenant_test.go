//go:build e2e

package tenants_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
)

// asTenant runs a command in the node's host as a tenant's user, as that
// user could by hand, and returns its combined output and error.
func asTenant(t *testing.T, n *slurmtest.Node, name string, argv ...string) (string, error) {
	t.Helper()
	cmd := n.Host.Command(context.Background(), "setpriv", append(slurmtest.AsUser(t, name), argv...)...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+filepath.Join(n.Dir, "slurm.conf"))
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// jobOf is the ID of the job Slurm lists for the pod.
func jobOf(t *testing.T, n *slurmtest.Node, pod *corev1.Pod) string {
	t.Helper()
	for _, line := range strings.Split(n.Slurm(t, "squeue", "--noheader", "--states=all", "--format=%i %k"), "\n") {
		if id, comment, ok := strings.Cut(strings.TrimSpace(line), " "); ok && comment == "vk-pod:"+string(pod.UID) {
			return id
		}
	}
	t.Fatalf("no job for pod %s", pod.Name)
	return ""
}

// TestTenantSandbox: a pod gets its tenant's uid, no capabilities, its
// own PID namespace, and no way to Slurm or munge; its Secret values are
// in no process's argv on the node, nor are an exec's.
func TestTenantSandbox(t *testing.T) {
	n, _, ns := slurmtest.RunningNode(t)
	ctx := context.Background()
	tenantUID := slurmtest.TenantCredential(t, slurmtest.TenantA).Uid
	secret := randomValue(t)
	if _, err := n.C.Client.CoreV1().Secrets(ns).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"v": secret},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	key := filepath.Join(n.Dir, "munge-key", "munge.key")
	sock := filepath.Join(n.Dir, "munge", "munge.socket")
	probe := `echo uid=$(id -u)
grep CapEff /proc/self/status
nsenter -t 1 -a true 2>/dev/null; echo nsenter=$?
for f in /etc/munge/munge.key "$1" "$2" /run/munge/munge.socket "$3"; do [ -e "$f" ] && echo "sees $f"; done
for c in squeue srun scancel sbatch scontrol munge; do command -v $c >/dev/null && echo "finds $c"; done
echo procs=$(ps -e -o comm= | tr '\n' ' ')
echo secret-len=${#SECRET}
echo done
sleep 3600`
	pod := n.Pod(ns, "probe", corev1.Container{Name: "main", Image: "busybox",
		Command: []string{"sh", "-c", probe, "sh", key, sock, filepath.Join(n.Dir, "slurm.conf")},
		Env:     []corev1.EnvVar{{Name: "SECRET", ValueFrom: &corev1.EnvVarSource{SecretKeyRef: &corev1.SecretKeySelector{LocalObjectReference: corev1.LocalObjectReference{Name: "s"}, Key: "v"}}}}})
	n.Create(t, pod)
	n.WaitPod(t, ns, "probe", "Running", daemontest.Running)
	var logs string
	slurmtest.Eventually(t, "the probe's output", func() (bool, string) {
		logs = n.Kubectl(t, "-n", ns, "logs", "probe")
		return strings.Contains(logs, "done"), logs
	})
	for _, want := range []string{"uid=" + strconv.Itoa(int(tenantUID)) + "\n", "CapEff:\t0000000000000000\n", "nsenter=1\n", "secret-len=" + strconv.Itoa(len(secret)) + "\n"} {
		if !strings.Contains(logs, want) {
			t.Errorf("the pod's output lacks %q:\n%s", want, logs)
		}
	}
	for _, bad := range []string{"sees ", "finds "} {
		if strings.Contains(logs, bad) {
			t.Errorf("the pod reaches Slurm or munge:\n%s", logs)
		}
	}
	// Its own PID namespace: the shell (PID 1) and ps, nothing of the node.
	for _, line := range strings.Split(logs, "\n") {
		if procs, ok := strings.CutPrefix(line, "procs="); ok {
			for _, p := range strings.Fields(procs) {
				if p != "sh" && p != "ps" && p != "tr" {
					t.Errorf("ps in the pod shows %q: %s", p, procs)
				}
			}
		}
	}
	// exec joins the same sandbox, as the same user.
	if out := n.Kubectl(t, "-n", ns, "exec", "probe", "--", "sh", "-c", "id -u; grep CapEff /proc/self/status; echo ${#SECRET}"); out != strconv.Itoa(int(tenantUID))+"\nCapEff:\t0000000000000000\n"+strconv.Itoa(len(secret))+"\n" {
		t.Errorf("exec: %q", out)
	}
	// During an exec too, no argv on the node holds the Secret's value.
	execCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	ex := n.C.KubectlCommand(execCtx, "-n", ns, "exec", "probe", "--", "sleep", "4")
	if err := ex.Start(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(2 * time.Second)
	ps, err := exec.Command("ps", "-eww", "-o", "args=").Output()
	if err != nil {
		t.Fatal(err)
	}
	_ = ex.Wait()
	if !strings.Contains(string(ps), "nsenter") {
		t.Errorf("the exec was not running while ps looked:\n%s", ps)
	}
	if strings.Contains(string(ps), secret) {
		t.Errorf("ps -eww on the node shows the Secret's value")
	}
}

func randomValue(t *testing.T) string {
	b := make([]byte, 12)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return "s3cret-" + hex.EncodeToString(b)
}

// TestSubPathSymlinkAttack: an init container plants a symlink to / in an
// emptyDir; a container mounting it by subPath sees the emptyDir's own
// content, and what it writes there stays in the emptyDir.
func TestSubPathSymlinkAttack(t *testing.T) {
	n, _, ns := slurmtest.RunningNode(t)
	marker := "vk-subpath-" + randomValue(t)
	pod := n.Pod(ns, "subpath", slurmtest.Shell("main", `ls -A /host; touch /host/`+marker+` 2>&1; echo done; sleep 3600`))
	pod.Spec.InitContainers = []corev1.Container{slurmtest.Shell("plant", "ln -s / /data/x")}
	pod.Spec.InitContainers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/host", SubPath: "x"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	n.Create(t, pod)
	var logs string
	slurmtest.Eventually(t, "the attack's output", func() (bool, string) {
		logs = n.Kubectl(t, "-n", ns, "logs", "subpath", "-c", "main")
		return strings.Contains(logs, "done"), logs
	})
	if logs != "x\ndone\n" {
		t.Errorf("/host in the pod shows %q, want the emptyDir's own content (x)", logs)
	}
	if _, err := os.Stat("/" + marker); err == nil {
		_ = os.Remove("/" + marker)
		t.Errorf("the pod wrote /%s on the node", marker)
	}
}

// TestTenantIsolation: tenant B, as its Unix user on the node, can neither
// read tenant A's pod files nor step into or cancel A's job: Slurm refuses
// B's uid. (From inside B's pods none of these commands exists: see
// TestTenantSandbox.)
func TestTenantIsolation(t *testing.T) {
	c := testcluster.Shared(t)
	nsA, nsB := c.Namespace(t), c.Namespace(t)
	n := slurmtest.NewNode(t, c, slurmtest.Tenants{slurmtest.TenantA: {nsA}, slurmtest.TenantB: {nsB}})
	n.Start(t)
	n.WaitReady(t)
	ctx := context.Background()
	if _, err := c.Client.CoreV1().Secrets(nsA).Create(ctx, &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "s"}, StringData: map[string]string{"v": "a-secret"},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a := n.Pod(nsA, "a", slurmtest.Shell("main", "sleep 3600"))
	a.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "s", MountPath: "/s"}}
	a.Spec.Volumes = []corev1.Volume{{Name: "s", VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{SecretName: "s"}}}}
	a = n.Create(t, a)
	n.WaitPod(t, nsA, "a", "Running", daemontest.Running)
	n.Create(t, n.Pod(nsB, "b", slurmtest.Shell("main", "sleep 3600")))
	n.WaitPod(t, nsB, "b", "Running", daemontest.Running)
	if out := n.Kubectl(t, "-n", nsB, "exec", "b", "--", "id", "-u"); strings.TrimSpace(out) != strconv.Itoa(int(slurmtest.TenantCredential(t, slurmtest.TenantB).Uid)) {
		t.Errorf("tenant B's pod runs as uid %q", out)
	}

	podDir := filepath.Join(n.Dir, "work", string(a.UID))
	if out, err := asTenant(t, n, slurmtest.TenantB, "cat", filepath.Join(podDir, "vol", "s", "v")); err == nil || strings.Contains(out, "a-secret") {
		t.Errorf("tenant B read tenant A's secret: %v %q", err, out)
	}
	if out, err := asTenant(t, n, slurmtest.TenantB, "ls", podDir); err == nil {
		t.Errorf("tenant B listed tenant A's pod directory: %q", out)
	}
	// The control: A's own user reads it.
	if out, err := asTenant(t, n, slurmtest.TenantA, "cat", filepath.Join(podDir, "vol", "s", "v")); err != nil || out != "a-secret" {
		t.Errorf("tenant A reading its own secret: %v %q", err, out)
	}
	job := jobOf(t, n, a)
	if out, err := asTenant(t, n, slurmtest.TenantB, "srun", "--jobid="+job, "--overlap", "true"); err == nil || !strings.Contains(out, "denied") {
		t.Errorf("tenant B's srun into A's job %s: %v %q, want Slurm's refusal", job, err, out)
	}
	if out, err := asTenant(t, n, slurmtest.TenantB, "scancel", job); err == nil || !strings.Contains(out, "denied") {
		t.Errorf("tenant B's scancel of A's job %s: %v %q, want Slurm's refusal", job, err, out)
	}
	time.Sleep(2 * time.Second)
	if p := n.WaitPod(t, nsA, "a", "Running", daemontest.Running); p.Status.Phase != corev1.PodRunning {
		t.Errorf("tenant A's pod after B's attempts: %s", p.Status.Phase)
	}
}

// TestForgedJobs: another Slurm user submits jobs named as the node's,
// with the victim's UID in the comment, and one with a comment that walks
// out of the work directory. The victim stays Running, across a restart
// of the daemon too, nothing is deleted, and both jobs are logged.
func TestForgedJobs(t *testing.T) {
	c := testcluster.Shared(t)
	nsA := c.Namespace(t)
	n := slurmtest.NewNode(t, c, slurmtest.Tenants{slurmtest.TenantA: {nsA}})
	d := n.Start(t)
	n.WaitReady(t)
	victim := n.Create(t, n.Pod(nsA, "victim", slurmtest.Shell("main", "sleep 3600")))
	n.WaitPod(t, nsA, "victim", "Running", daemontest.Running)
	sentinel := filepath.Join(n.Dir, "sentinel")
	if err := os.MkdirAll(filepath.Join(sentinel, "keep"), 0o755); err != nil {
		t.Fatal(err)
	}
	forge := func(comment string) string {
		out, err := asTenant(t, n, slurmtest.TenantB, "sbatch", "--parsable", "--job-name=vk_"+n.Name, "--comment="+comment, "--output=/dev/null", "--wrap", "true")
		if err != nil {
			t.Fatalf("forging a job: %v %s", err, out)
		}
		return strings.TrimSpace(out)
	}
	ids := []string{forge("vk-pod:" + string(victim.UID)), forge("vk-pod:../sentinel")}
	for _, id := range ids {
		slurmtest.Eventually(t, "the forged job "+id+" logged", func() (bool, string) {
			return strings.Contains(d.Output.String(), "job "+id+" of user"), "not yet"
		})
	}
	// Several polls after the forged jobs ended.
	time.Sleep(3 * time.Second)
	if p := n.WaitPod(t, nsA, "victim", "Running", daemontest.Running); p.Status.Phase != corev1.PodRunning {
		t.Errorf("the victim is %s after the forged jobs", p.Status.Phase)
	}
	d.Stop(20 * time.Second)
	n.Start(t)
	time.Sleep(3 * time.Second)
	p := n.WaitPod(t, nsA, "victim", "Running", daemontest.Running)
	if len(p.Status.ContainerStatuses) != 1 || p.Status.ContainerStatuses[0].State.Running == nil {
		t.Errorf("the victim after a restart: %+v", p.Status.ContainerStatuses)
	}
	if _, err := os.Stat(filepath.Join(sentinel, "keep")); err != nil {
		t.Errorf("a forged comment deleted %s: %v", sentinel, err)
	}
}

// TestTenantPolicy: what a namespace may not ask of Slurm ends the pod
// ProviderRejected, naming the annotation or the namespace.
func TestTenantPolicy(t *testing.T) {
	c := testcluster.Shared(t)
	nsA, unmapped := c.Namespace(t), c.Namespace(t)
	n := slurmtest.NewNode(t, c, slurmtest.Tenants{slurmtest.TenantA: {nsA}})
	n.Start(t)
	n.WaitReady(t)
	rejected := func(ns, name, want string) {
		t.Helper()
		p := n.WaitPod(t, ns, name, "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if p.Status.Reason != "ProviderRejected" || !strings.Contains(p.Status.Message, want) {
			t.Errorf("pod %s: reason %q message %q, want ProviderRejected naming %q", name, p.Status.Reason, p.Status.Message, want)
		}
	}
	nice := n.Pod(nsA, "nice", slurmtest.Shell("main", "true"))
	nice.Annotations = map[string]string{"slurm.virtual-kubelet.io/sbatch-nice": "-10"}
	n.Create(t, nice)
	resv := n.Pod(nsA, "resv", slurmtest.Shell("main", "true"))
	resv.Annotations = map[string]string{"slurm.virtual-kubelet.io/sbatch-reservation": "maint"}
	n.Create(t, resv)
	n.Create(t, n.Pod(unmapped, "stray", slurmtest.Shell("main", "true")))
	rejected(nsA, "nice", "annotation slurm.virtual-kubelet.io/sbatch-nice")
	rejected(nsA, "resv", "annotation slurm.virtual-kubelet.io/sbatch-reservation")
	rejected(unmapped, "stray", `namespace "`+unmapped+`"`)
	// The control: a nice the tenant may set runs.
	ok := n.Pod(nsA, "ok", slurmtest.Shell("main", "true"))
	ok.Annotations = map[string]string{"slurm.virtual-kubelet.io/sbatch-nice": "10"}
	n.Create(t, ok)
	n.WaitPod(t, nsA, "ok", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
}

// TestDaemonRefusesRoot: a tenant mapped to root, or a root daemon without
// tenants, is a one-line error at start.
func TestDaemonRefusesRoot(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("the refusal of a root daemon without tenants needs root")
	}
	c := testcluster.Shared(t)
	dir := t.TempDir()
	for _, tc := range []struct{ name, extra, want string }{
		{"root tenant", "tenants: [{namespaces: [a], user: root}]\n", `tenants[0].user: "root" is root (uid 0)`},
		{"no tenants", "", "the daemon runs as root, so jobs would run as root"},
	} {
		cfg := filepath.Join(dir, tc.name+".yaml")
		data := "workDir: " + filepath.Join(dir, "work") + "\nimages: {busybox: {host: true}}\ncapacity: {cpu: \"1\"}\n" + tc.extra
		if err := os.WriteFile(cfg, []byte(data), 0o600); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		out, err := exec.CommandContext(ctx, daemontest.Binary(), "--provider", "slurm", "--provider-config", cfg, "--nodename", "refused",
			"--kubeconfig", c.Info.NodeKubeconfig, "--metrics-addr", "").CombinedOutput()
		cancel()
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		if err == nil || !strings.Contains(lines[len(lines)-1], tc.want) {
			t.Errorf("%s: %v, last line %q, want one naming %q\n%s", tc.name, err, lines[len(lines)-1], tc.want, out)
		}
	}
}

// TestLogBounds: a container writing 1 GiB to stdout leaves at most the
// default 10Mi x 5 of log on disk, and kubectl logs shows its newest line.
func TestLogBounds(t *testing.T) {
	n, _, ns := slurmtest.RunningNode(t)
	pod := n.Create(t, n.Pod(ns, "loud", slurmtest.Shell("main", `dd if=/dev/zero bs=1M count=1024 2>/dev/null | tr '\0' x; echo; echo the-end; sleep 3600`)))
	slurmtest.Eventually(t, "the loud pod's last line", func() (bool, string) {
		out := n.Kubectl(t, "-n", ns, "logs", "loud", "--tail=1")
		return out == "the-end\n", out
	})
	files, err := filepath.Glob(filepath.Join(n.Dir, "work", string(pod.UID), "c", "main", "log*"))
	if err != nil {
		t.Fatal(err)
	}
	var total int64
	for _, f := range files {
		if st, err := os.Stat(f); err == nil {
			total += st.Size()
		}
	}
	if len(files) == 0 || total > 60<<20 {
		t.Errorf("%d log files holding %d bytes, want at most 60 MiB", len(files), total)
	}
}

// TestEmptyDirEviction: a pod writing past its emptyDir's sizeLimit is
// evicted, as the kubelet evicts it: Failed, Evicted, naming the volume.
func TestEmptyDirEviction(t *testing.T) {
	n, _, ns := slurmtest.RunningNode(t)
	limit := resource.MustParse("1Mi")
	pod := n.Pod(ns, "full", slurmtest.Shell("main", "head -c 5000000 /dev/zero > /data/fill; sleep 3600"))
	pod.Spec.Containers[0].VolumeMounts = []corev1.VolumeMount{{Name: "data", MountPath: "/data"}}
	pod.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: &limit}}}}
	n.Create(t, pod)
	got := n.WaitPod(t, ns, "full", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if got.Status.Reason != "Evicted" || !strings.Contains(got.Status.Message, `EmptyDir volume "data" exceeds the limit "1Mi"`) {
		t.Errorf("reason %q message %q, want Evicted naming the volume", got.Status.Reason, got.Status.Message)
	}
}
