//go:build e2e

package e2e_test

import (
	"cmp"
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/tools/cache"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// benchPodsVar runs TestSlurmBench with that many pods; unset, it skips.
// VK_SLURM_BENCH_OUT names a file for its table (markdown), and
// VK_SLURM_BENCH_FLAGS adds flags to the daemon's (--log-level info, as
// users run it, unless they say otherwise).
const (
	benchPodsVar  = "VK_SLURM_BENCH_PODS"
	benchOutVar   = "VK_SLURM_BENCH_OUT"
	benchFlagsVar = "VK_SLURM_BENCH_FLAGS"
)

// benchWorkers is the concurrency of both passes: the floor's sbatch and
// scancel calls, and the bench's pod creates and deletes (the daemon's own
// is its --pod-sync-workers default, 50).
const benchWorkers = 50

// floorScript runs in the node host: it submits N jobs of one task that
// sleep, as a pod's job does (same environment: sbatch's own, PATH and
// SLURM_CONF), with sbatch, W at a time; waits until squeue shows all
// RUNNING and until each job's script has started (it touches a file in
// MARKS), cancels them with scancel, W at a time, and waits until squeue
// shows none. It prints the five times (start, all submitted, all RUNNING,
// all scripts started, none left), in seconds since the epoch. It looks at
// the marks every 0.1 s and asks squeue every 0.5 s, as the pod pass
// watches the API server rather than list it: the observer's load stays
// out of both passes.
const floorScript = `set -euo pipefail
n=$1 workers=$2 marks=$3
t0=$EPOCHREALTIME
seq "$n" | xargs -P "$workers" -I{} env -i PATH="$PATH" SLURM_CONF="$SLURM_CONF" sbatch --parsable --quiet --export=ALL \
	--job-name=vk_floor --output=/dev/null --nodes=1 --ntasks=1 --cpus-per-task=1 \
	--wrap="touch $marks/\$SLURM_JOB_ID; exec sleep 3600" >/dev/null
ts=$EPOCHREALTIME
t1= t2= i=0
while [[ -z $t1 || -z $t2 ]]; do
	if ((i++ % 5 == 0)); then
		states=$(squeue --noheader --name=vk_floor --format='%T %r')
		if held=$(grep -i held <<<"$states"); then
			echo "jobs held: $held" >&2
			exit 1
		fi
		[[ -z $t1 ]] && (($(grep -c '^RUNNING ' <<<"$states") == n)) && t1=$EPOCHREALTIME
	fi
	[[ -z $t2 ]] && (($(find "$marks" -type f | wc -l) == n)) && t2=$EPOCHREALTIME
	sleep 0.1
done
squeue --noheader --name=vk_floor --format=%i | xargs -P "$workers" -n 1 scancel
until [[ -z $(squeue --noheader --name=vk_floor --format=%i) ]]; do sleep 0.1; done
echo "$t0 $ts $t1 $t2 $EPOCHREALTIME"
`

// benchTimes are one pass's figures: from the first submission (or pod
// create) until all run (their scripts, or the pods' containers, started),
// and from the first cancel (or delete) until all are gone.
type benchTimes struct {
	running, gone time.Duration
	allocated     time.Duration // the floor's: until squeue shows all RUNNING, before their scripts start
	load          string        // /proc/loadavg's 1-, 5- and 15-minute figures at the start
	machineCPU    time.Duration // CPU time all the machine's processes used over the pass
	byCommand     []commandCPU  // that CPU time by command, most first
	timeline      string        // when the jobs' scripts (the floor's) or the pods' containers started, when the pods were seen Running, and when deleted, ended and gone
}

// TestSlurmBench measures N pods on one Slurm node against the floor, what
// sbatch and scancel alone take for N equivalent jobs on the same Slurm:
// submitted to all Running, and deleted to all gone, as ratios. The daemon
// is built without -race for it. The Slurm node lets enough jobs share a
// core for all N to run at once (SLURM_JOBS_PER_CORE).
func TestSlurmBench(t *testing.T) {
	v := os.Getenv(benchPodsVar)
	if v == "" {
		t.Skipf("set %s (e.g. 200) to run the bench", benchPodsVar)
	}
	pods, err := strconv.Atoi(v)
	if err != nil || pods < 1 {
		t.Fatalf("%s=%q: want a pod count", benchPodsVar, v)
	}
	c := testcluster.Shared(t)
	perCore := max(64, (pods+runtime.NumCPU()-1)/runtime.NumCPU())
	ns := c.Namespace(t)
	// VK_SLURM_BENCH_ACCT sets JobAcctGatherFrequency: with
	// jobacct_gather/linux each job's slurmstepd scans /proc at that
	// interval, a cost that grows with the jobs' processes and lifetimes.
	// Slurm's default, 30 s, unless set: what a site runs unless it chose
	// otherwise (the e2e tests' 5 s is for kubectl top's freshness), and
	// at 5 s, with 100 jobs a core, the scans of Slurm's own daemons are
	// most of what the pass measures.
	n := slurmtest.NewNode(t, c, slurmtest.Tenants{slurmtest.TenantA: {ns}}, "SLURM_JOBS_PER_CORE="+strconv.Itoa(perCore),
		"SLURM_ACCT_GATHER_FREQUENCY="+cmp.Or(os.Getenv("VK_SLURM_BENCH_ACCT"), "30"))

	floor := floorPass(t, n, pods)
	t.Logf("floor: %d jobs RUNNING in squeue in %s, their scripts started in %s, gone in %s (load %s); CPU-s by command, own+reaped children's: %s",
		pods, floor.allocated, floor.running, floor.gone, floor.load, formatCPU(floor.byCommand, 10))

	fast := t.TempDir()
	if err := childproc.Build(fast); err != nil {
		t.Fatal(err)
	}
	cfg, err := os.ReadFile(n.Config)
	if err != nil {
		t.Fatal(err)
	}
	cfg = []byte(strings.Replace(string(cfg), `pods: "100"`, fmt.Sprintf(`pods: "%d"`, pods), 1))
	if err := os.WriteFile(n.Config, cfg, 0o600); err != nil {
		t.Fatal(err)
	}
	d := n.StartBinary(t, filepath.Join(fast, "virtual-kubelet"), append([]string{"--log-level", "info"}, strings.Fields(os.Getenv(benchFlagsVar))...)...)
	n.WaitReady(t)
	cpuBefore := processCPU(t, d.Cmd.Process.Pid)
	daemon := podPass(t, n, ns, pods)
	cpu := processCPU(t, d.Cmd.Process.Pid) - cpuBefore
	t.Logf("floor timeline: %s; daemon timeline: %s", floor.timeline, daemon.timeline)
	t.Logf("daemon: %d pods Running in %s, gone in %s (load %s), daemon CPU %s; CPU-s by command, own+reaped children's: %s",
		pods, daemon.running, daemon.gone, daemon.load, cpu, formatCPU(daemon.byCommand, 10))

	table := fmt.Sprintf(`| %d pods, one Slurm node (%d CPUs, %d jobs a core) | submitted → all running | deleted → all gone |
|---|---|---|
| floor: sbatch / scancel alone, %d at a time (squeue RUNNING; job scripts started) | %.2fs; %.2fs | %.2fs |
| virtual-kubelet --provider slurm (pods Running; gone from the API server) | %.2fs | %.2fs |
| ratio to the floor (to squeue RUNNING; to scripts started) | %.2f×; %.2f× | %.2f× |

Load average (1, 5, 15 min) at the start of the floor pass: %s; of the daemon pass: %s. CPU time of the whole machine over the floor pass: %.1fs; over the daemon pass: %.1fs, of which the daemon's own: %.1fs.
`, pods, runtime.NumCPU(), perCore, benchWorkers, floor.allocated.Seconds(), floor.running.Seconds(), floor.gone.Seconds(),
		daemon.running.Seconds(), daemon.gone.Seconds(),
		daemon.running.Seconds()/floor.allocated.Seconds(), daemon.running.Seconds()/floor.running.Seconds(), daemon.gone.Seconds()/floor.gone.Seconds(),
		floor.load, daemon.load, floor.machineCPU.Seconds(), daemon.machineCPU.Seconds(), cpu.Seconds())
	t.Log("\n" + table)
	if out := os.Getenv(benchOutVar); out != "" {
		if err := os.WriteFile(out, []byte(table), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

// loadAvg is /proc/loadavg's first three figures.
func loadAvg(t *testing.T) string {
	t.Helper()
	data, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		t.Fatal(err)
	}
	return strings.Join(strings.Fields(string(data))[:3], " ")
}

// machineCPU is the CPU time (user, nice, system, irq, softirq) the
// machine has used since it booted, from /proc/stat.
func machineCPU(t *testing.T) time.Duration {
	t.Helper()
	data, err := os.ReadFile("/proc/stat")
	if err != nil {
		t.Fatal(err)
	}
	line, _, _ := strings.Cut(string(data), "\n")
	f := strings.Fields(line)
	var ticks int64
	for _, i := range []int{1, 2, 3, 6, 7} {
		v, err := strconv.ParseInt(f[i], 10, 64)
		if err != nil {
			t.Fatalf("/proc/stat: %q", line)
		}
		ticks += v
	}
	return time.Duration(ticks) * 10 * time.Millisecond
}

// processCPU is the user and system CPU time a process has used.
func processCPU(t *testing.T, pid int) time.Duration {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		t.Fatal(err)
	}
	_, cpu, ok := parseProcStat(string(data))
	if !ok {
		t.Fatalf("/proc/%d/stat: %q", pid, data)
	}
	return cpu.self
}

// floorPass runs floorScript in the node host.
func floorPass(t *testing.T, n *slurmtest.Node, jobs int) benchTimes {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	load, cpu, procs := loadAvg(t), machineCPU(t), takeCPUSnapshot()
	marks := filepath.Join(n.Dir, "floor-marks")
	if err := os.Mkdir(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(marks, 0o777); err != nil {
		t.Fatal(err)
	}
	// The floor submits and cancels as the pods' tenant does.
	cmd := n.Host.Command(ctx, "setpriv", append(slurmtest.AsUser(t, slurmtest.TenantA), "bash", "-c", floorScript, "floor", strconv.Itoa(jobs), strconv.Itoa(benchWorkers), marks)...)
	cmd.Env = append(os.Environ(), "SLURM_CONF="+filepath.Join(n.Dir, "slurm.conf"))
	cmd.Dir = "/"
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("the floor pass: %v\n%s", err, out)
	}
	var t0, ts, t1, t2, t3 float64
	if _, err := fmt.Sscan(string(out), &t0, &ts, &t1, &t2, &t3); err != nil {
		t.Fatalf("the floor pass printed %q: %v", out, err)
	}
	sec := func(s float64) time.Duration { return time.Duration(s * float64(time.Second)) }
	started := fmt.Sprintf("all submitted %.2fs; scripts started %s", ts-t0, spread(time.Unix(0, int64(t0*1e9)), modTimes(filepath.Join(marks, "*"))))
	return benchTimes{timeline: started, allocated: sec(t1 - t0), running: sec(t2 - t0), gone: sec(t3 - t2), load: load, machineCPU: machineCPU(t) - cpu, byCommand: takeCPUSnapshot().cpuSince(procs)}
}

// benchContainer sleeps and exits on TERM, as the floor's job does. A bare
// sleep would not: it is its PID namespace's init, which ignores TERM without
// a handler (as in a kubelet's container), so each delete would wait out its
// grace period.
var benchContainer = corev1.Container{Name: "main", Image: "busybox", Command: []string{"sh", "-c", "trap 'exit 0' TERM; sleep 3600 & wait"}}

// podPass creates the pods (each one container sleeping, as the floor's
// jobs do), benchWorkers at a time, waits until all are Running, deletes
// them gracefully, benchWorkers at a time, and waits until all are gone,
// as the API server shows them.
func podPass(t *testing.T, n *slurmtest.Node, ns string, pods int) benchTimes {
	t.Helper()
	ctx := context.Background()
	load, cpu, procs := loadAvg(t), machineCPU(t), takeCPUSnapshot()
	inParallel := func(f func(name string) error) {
		var wg sync.WaitGroup
		errs := make(chan error, pods)
		names := make(chan string)
		for range benchWorkers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for name := range names {
					if err := f(name); err != nil {
						errs <- err
					}
				}
			}()
		}
		for i := range pods {
			names <- fmt.Sprintf("b%d", i)
		}
		close(names)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatal(err)
		}
	}
	watched := observePods(t, n, ns)
	start := time.Now()
	var mu sync.Mutex
	var created []time.Time
	inParallel(func(name string) error {
		_, err := n.C.Client.CoreV1().Pods(ns).Create(ctx, n.Pod(ns, name, benchContainer), metav1.CreateOptions{})
		mu.Lock()
		created = append(created, time.Now())
		mu.Unlock()
		return err
	})
	runningAt := watched.wait(t, "all pods Running", func(o *podObserver) []time.Time {
		if len(o.running) < pods {
			return nil
		}
		return slices.Collect(maps.Values(o.running))
	})
	running := latest(runningAt).Sub(start)
	timeline := fmt.Sprintf("created %s; submitted %s; containers started %s; seen Running %s",
		spread(start, created), spread(start, modTimes(filepath.Join(n.Dir, "work", ".vk-state", "*.json"))),
		spread(start, modTimes(filepath.Join(n.Dir, "work", "*", "c", "main", "info"))), spread(start, runningAt))
	start = time.Now()
	exits := sampleModTimes(filepath.Join(n.Dir, "work", "*", "c", "main", "exit"))
	var deleted []time.Time
	inParallel(func(name string) error {
		err := n.C.Client.CoreV1().Pods(ns).Delete(ctx, name, metav1.DeleteOptions{})
		mu.Lock()
		deleted = append(deleted, time.Now())
		mu.Unlock()
		return err
	})
	goneAt := watched.wait(t, "all pods gone", func(o *podObserver) []time.Time {
		if len(o.gone) < pods {
			return nil
		}
		return slices.Collect(maps.Values(o.gone))
	})
	gone := latest(goneAt).Sub(start)
	watched.mu.Lock()
	endedAt := slices.Collect(maps.Values(watched.ended))
	watched.mu.Unlock()
	timeline += fmt.Sprintf("; deleted %s; containers exited %s; seen ended %s; gone %s", spread(start, deleted), spread(start, exits()), spread(start, endedAt), spread(start, goneAt))
	return benchTimes{running: running, gone: gone, timeline: timeline, load: load, machineCPU: machineCPU(t) - cpu, byCommand: takeCPUSnapshot().cpuSince(procs)}
}

// podObserver follows the pass's pods through an informer, one list and
// then a watch, rather than listing them all again and again: a load on
// the API server that the pass would be measured with.
type podObserver struct {
	mu      sync.Mutex
	running map[string]time.Time // when each pod was first seen Running
	ended   map[string]time.Time // when each pod was first seen Succeeded or Failed
	gone    map[string]time.Time // when each pod was seen deleted
}

// observePods starts following the namespace's pods, until the test ends.
func observePods(t *testing.T, n *slurmtest.Node, ns string) *podObserver {
	t.Helper()
	o := &podObserver{running: map[string]time.Time{}, ended: map[string]time.Time{}, gone: map[string]time.Time{}}
	factory := informers.NewSharedInformerFactoryWithOptions(n.C.Client, 0, informers.WithNamespace(ns))
	pods := factory.Core().V1().Pods().Informer()
	saw := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok {
			return
		}
		var first map[string]time.Time
		switch p.Status.Phase {
		case corev1.PodRunning:
			first = o.running
		case corev1.PodSucceeded, corev1.PodFailed:
			first = o.ended
		default:
			return
		}
		o.mu.Lock()
		if _, ok := first[p.Name]; !ok {
			first[p.Name] = time.Now()
		}
		o.mu.Unlock()
	}
	if _, err := pods.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    saw,
		UpdateFunc: func(_, obj any) { saw(obj) },
		DeleteFunc: func(obj any) {
			if d, ok := obj.(cache.DeletedFinalStateUnknown); ok {
				obj = d.Obj
			}
			if p, ok := obj.(*corev1.Pod); ok {
				o.mu.Lock()
				o.gone[p.Name] = time.Now()
				o.mu.Unlock()
			}
		},
	}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	factory.Start(ctx.Done())
	for typ, ok := range factory.WaitForCacheSync(ctx.Done()) {
		if !ok {
			t.Fatalf("the %v informer did not sync", typ)
		}
	}
	return o
}

// wait waits until done returns the times it was waiting for.
func (o *podObserver) wait(t *testing.T, what string, done func(*podObserver) []time.Time) []time.Time {
	t.Helper()
	var at []time.Time
	poll.Until(t, 10*time.Minute, what, func() (bool, string) {
		o.mu.Lock()
		defer o.mu.Unlock()
		at = done(o)
		return at != nil, fmt.Sprintf("%d seen Running, %d deleted", len(o.running), len(o.gone))
	})
	return at
}

// latest is the latest of times.
func latest(times []time.Time) time.Time {
	return slices.MaxFunc(times, time.Time.Compare)
}
