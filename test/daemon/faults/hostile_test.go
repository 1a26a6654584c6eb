//go:build e2e

package faults_test

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/nethost"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// A pod author attacks the node, through the API server with real clients:
// no annotation, copy or request flood of theirs takes the daemon down.

// Sizes of the exec flood: the default suite runs a scaled-down one; set
// VK_HOSTILE_PODS=5000 VK_HOSTILE_EXECS=10000 for the full one.
const (
	envFloodPods  = "VK_HOSTILE_PODS"
	envFloodExecs = "VK_HOSTILE_EXECS"
)

// memoryBound is the most the daemon (built with -race, which multiplies
// its memory) may hold at any time during these tests, beside
// perPodMemory for each pod it runs: far below what buffering a 1 GiB
// copy would take.
const (
	memoryBound  = 1 << 30
	perPodMemory = 200 << 10
)

// floodGrowth is how much an exec flood may raise the daemon's peak memory
// over what it held before: requests hold memory while they run, never
// for good.
const floodGrowth = 256 << 20

// processMemory reads a process's resident set and its peak from
// /proc/<pid>/status, in bytes.
func processMemory(t *testing.T, pid int) (rss, peak int64) {
	t.Helper()
	data, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		t.Fatal(err)
	}
	for s := bufio.NewScanner(bytes.NewReader(data)); s.Scan(); {
		name, value, _ := strings.Cut(s.Text(), ":")
		kb, err := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(value), " kB"), 10, 64)
		switch {
		case name != "VmRSS" && name != "VmHWM":
		case err != nil:
			t.Fatalf("/proc/%d/status: %s: %v", pid, s.Text(), err)
		case name == "VmRSS":
			rss = kb << 10
		default:
			peak = kb << 10
		}
	}
	if rss == 0 || peak == 0 {
		t.Fatalf("/proc/%d/status has no VmRSS or VmHWM", pid)
	}
	return rss, peak
}

// daemonPID is the daemon's process id; ip netns exec runs the binary in
// its own process.
func daemonPID(t *testing.T, d *daemontest.Daemon) int {
	t.Helper()
	pid := d.Cmd.Process.Pid
	if comm, err := os.ReadFile(fmt.Sprintf("/proc/%d/comm", pid)); err != nil || strings.TrimSpace(string(comm)) != "virtual-kubelet" {
		t.Fatalf("process %d is %q (%v), not the daemon", pid, comm, err)
	}
	return pid
}

// attackedNode starts a daemon in a node host, so the API server reaches
// its kubelet API, and returns the cluster, a namespace for the test, the
// daemon, its process id and its host. The daemon serves pprof on the
// host's loopback (see goroutines).
func attackedNode(t *testing.T) (*testcluster.Cluster, string, *daemontest.Daemon, int, *nethost.Host) {
	t.Helper()
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	host := c.AddHost(t, testcluster.UniqueName("h"))
	d := daemontest.Start(t, c, host, "--metrics-addr", profilingAddr, "--enable-profiling")
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	return c, ns, d, daemonPID(t, d), host
}

// profilingAddr is where an attacked node's daemon serves pprof, on its
// host's loopback.
const profilingAddr = "127.0.0.1:10255"

// stalledAfter is how long an exec of the flood runs before the test takes
// the goroutines of both sides: at least 20 times the median on a loaded
// machine.
const stalledAfter = 15 * time.Second

// goroutines returns the goroutines of the test process and of the daemon
// in host, stacks grouped with their counts, to show where a request
// stalled while it still is.
func goroutines(host *nethost.Host) string {
	var b strings.Builder
	b.WriteString("the test's goroutines:\n")
	_ = pprof.Lookup("goroutine").WriteTo(&b, 1)
	b.WriteString("\nthe daemon's goroutines:\n")
	client := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		DialContext: func(context.Context, string, string) (net.Conn, error) { return host.Dial("tcp", profilingAddr) },
	}}
	resp, err := client.Get("http://" + profilingAddr + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		b.WriteString(err.Error())
		return b.String()
	}
	defer resp.Body.Close()
	_, _ = io.Copy(&b, io.LimitReader(resp.Body, 4<<20))
	return b.String()
}

// checkMemory fails the test if the daemon's peak memory passed the bound
// for a node of pods, logs its figures and returns its resident set.
func checkMemory(t *testing.T, pid, pods int, when string) int64 {
	t.Helper()
	rss, peak := processMemory(t, pid)
	t.Logf("daemon memory %s: VmRSS %d MiB, VmHWM %d MiB", when, rss>>20, peak>>20)
	if bound := int64(memoryBound + pods*perPodMemory); peak > bound {
		t.Errorf("daemon memory %s: VmHWM %d MiB, past the bound of %d MiB", when, peak>>20, bound>>20)
	}
	return rss
}

// TestHostileAnnotationsAreRejected: each scripted annotation with a value
// that would spend the node is refused, the pod Failed with reason
// ProviderRejected and a message naming the annotation and the bound; a
// hang without hang-for ends, and other pods run meanwhile.
func TestHostileAnnotationsAreRejected(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	// Four workers: one may hang (a quarter of them).
	d := daemontest.Start(t, c, nil, "--pod-sync-workers", "4")
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	always := corev1.RestartPolicyAlways

	hostile := []struct {
		name        string
		annotations map[string]string
		annotation  string
		bound       string
	}{
		{"log-flood", map[string]string{mock.AnnotationLogInterval: "1ns"}, mock.AnnotationLogInterval, "minimum of " + mock.MinLogInterval.String()},
		{"crash-storm", map[string]string{mock.AnnotationRunFor: "1ms", mock.AnnotationRestartDelay: "0"}, mock.AnnotationRunFor, "minimum of " + mock.MinRunFor.String()},
		{"restart-storm", map[string]string{mock.AnnotationRestartDelay: "0s"}, mock.AnnotationRestartDelay, "minimum of " + mock.MinRestartDelay.String()},
		{"per-container", map[string]string{mock.AnnotationLogInterval + ".main": "1us"}, mock.AnnotationLogInterval + ".main", "minimum of"},
		{"hang-for-ever", map[string]string{mock.AnnotationHangCalls: "*", mock.AnnotationHangFor: "1000h"}, mock.AnnotationHangFor, "maximum of " + mock.MaxHang.String()},
	}
	// Created first, so it holds a worker while the others are handled.
	daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod("hangs", d.Name, always, map[string]string{mock.AnnotationHangCalls: "CreatePod"}))
	for _, h := range hostile {
		daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod(h.name, d.Name, always, h.annotations))
	}
	daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod("bystander", d.Name, always, nil))

	for _, h := range hostile {
		p := daemontest.WaitPod(t, c.Client, ns, h.name, "rejected", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
		if p.Status.Reason != "ProviderRejected" || !strings.Contains(p.Status.Message, "annotation "+h.annotation+":") || !strings.Contains(p.Status.Message, h.bound) {
			t.Errorf("%s: reason %q message %q, want ProviderRejected naming %s and the %s", h.name, p.Status.Reason, p.Status.Message, h.annotation, h.bound)
		}
	}
	daemontest.WaitPod(t, c.Client, ns, "bystander", "Running while another pod's call hangs", daemontest.Running)
	// The hang ends at its bound and the call does its work.
	daemontest.WaitPod(t, c.Client, ns, "hangs", "Running after its hang", daemontest.Running)
	daemontest.CheckNoPanic(t, d)
}

// TestHugeCopyIsRefused: kubectl cp of a 1 GiB file into a mock container
// fails with one clear line, and the daemon never holds the file.
func TestHugeCopyIsRefused(t *testing.T) {
	c, ns, d, pid, _ := attackedNode(t)
	ctx := context.Background()
	daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod("target", d.Name, corev1.RestartPolicyAlways, nil))
	daemontest.WaitPod(t, c.Client, ns, "target", "Running", daemontest.Running)

	// Sparse: a gigabyte for kubectl to send, not on the disk.
	big := filepath.Join(t.TempDir(), "big.bin")
	f, err := os.Create(big)
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(1 << 30); err != nil {
		t.Fatal(err)
	}
	f.Close()
	rssBefore, _ := processMemory(t, pid)

	// The whole gigabyte crosses the API server before tar's refusal ends
	// the copy (the mock drains it, as tar does, or kubectl loses the
	// message): minutes on a loaded two-core machine.
	bigCtx, cancel := context.WithTimeout(ctx, 6*time.Minute)
	defer cancel()
	out, err := c.Kubectl(bigCtx, "-n", ns, "cp", big, "target:/srv/big.bin", "-c", "main")
	want := fmt.Sprintf("tar: /srv/big.bin: the mock holds at most %d MiB copied into a container", mock.MaxCopiedBytes>>20)
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("kubectl cp of 1 GiB: %v\n%s\nwant it refused with %q", err, out, want)
	}
	rss, peak := processMemory(t, pid)
	t.Logf("daemon memory around a 1 GiB kubectl cp: VmRSS %d MiB before, %d MiB after, VmHWM %d MiB", rssBefore>>20, rss>>20, peak>>20)
	if peak-rssBefore > 256<<20 {
		t.Errorf("the refused copy raised the daemon's peak memory from %d MiB to %d MiB", rssBefore>>20, peak>>20)
	}

	// The container still takes a copy that fits.
	small := filepath.Join(t.TempDir(), "small.txt")
	if err := os.WriteFile(small, []byte("fits\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	smallCtx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if out, err := c.Kubectl(smallCtx, "-n", ns, "cp", small, "target:/srv/small.txt", "-c", "main"); err != nil {
		t.Errorf("kubectl cp of a small file: %v\n%s", err, out)
	}
	if out, err := c.Kubectl(smallCtx, "-n", ns, "exec", "target", "--", "cat", "/srv/small.txt"); err != nil || out != "fits\n" {
		t.Errorf("cat of the copied file: %v %q", err, out)
	}
	checkMemory(t, pid, 1, "after the copies")
	daemontest.CheckNoPanic(t, d)
}

// TestExecFlood: exec requests in a loop, through the API server, against
// a node with many pods: each finds its pod by name, the daemon's memory
// stays bounded, a pod created during the flood runs, nothing panics.
// VK_HOSTILE_PODS and VK_HOSTILE_EXECS size it (500 and 1,000 by default;
// the figures are 5,000 and 10,000).
func TestExecFlood(t *testing.T) {
	pods, execs := daemontest.FloodSize(t, envFloodPods, 500), daemontest.FloodSize(t, envFloodExecs, 1000)
	c, ns, d, pid, host := attackedNode(t)
	ctx := context.Background()

	start := time.Now()
	if n, err := daemontest.InParallel(pods, func(i int) error {
		_, err := c.Client.CoreV1().Pods(ns).Create(ctx, daemontest.MockPod(fmt.Sprintf("p%d", i), d.Name, corev1.RestartPolicyAlways, nil), metav1.CreateOptions{})
		return err
	}); n > 0 {
		t.Fatalf("creating the pods: %d failed, the first: %v", n, err)
	}
	daemontest.EventuallyWithin(t, 10*time.Minute, fmt.Sprintf("%d pods Running", pods), func() (bool, string) {
		list, err := c.Client.CoreV1().Pods(ns).List(ctx, metav1.ListOptions{ResourceVersion: "0"})
		if err != nil {
			return false, err.Error()
		}
		n := 0
		for _, p := range list.Items {
			if daemontest.Running(&p) {
				n++
			}
		}
		return n == pods, fmt.Sprintf("%d of %d Running", n, pods)
	})
	t.Logf("%d pods Running after %s", pods, time.Since(start).Round(time.Second))
	before := checkMemory(t, pid, pods, fmt.Sprintf("with %d pods", pods))

	// How long a pod takes to be seen Running on the quiet node, for
	// comparison with one created during the flood.
	quiet := time.Now()
	daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod("quiet", d.Name, corev1.RestartPolicyAlways, nil))
	daemontest.WaitPod(t, c.Client, ns, "quiet", "Running", daemontest.Running)
	t.Logf("a pod created on the quiet node was seen Running after %s", time.Since(quiet).Round(10*time.Millisecond))

	// The flood: each request for another pod. A pod created during it
	// runs; the wait is generous, not timed.
	start = time.Now()
	flood := make(chan struct{})
	created := make(chan time.Time, 1)
	var failed int64
	var firstErr error
	took := make([]time.Duration, execs)
	var stall string // guarded by stallOnce
	var stallOnce sync.Once
	go func() {
		defer close(flood)
		failed, firstErr = daemontest.InParallel(execs, func(i int) error {
			if i == execs/10 {
				created <- time.Now()
				if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, daemontest.MockPod("latecomer", d.Name, corev1.RestartPolicyAlways, nil), metav1.CreateOptions{}); err != nil {
					return err
				}
			}
			pod, began := fmt.Sprintf("p%d", i%pods), time.Now()
			// The goroutines of both sides, taken while the first exec to
			// take long still waits (the client gives up at 30 s).
			slow := time.AfterFunc(stalledAfter, func() { stallOnce.Do(func() { stall = goroutines(host) }) })
			err := execTrue(ctx, c, ns, pod)
			slow.Stop()
			took[i] = time.Since(began)
			if err != nil {
				return fmt.Errorf("exec %d in %s, at %s after %s: %w", i, pod, began.Format(time.RFC3339Nano), took[i].Round(time.Millisecond), err)
			}
			return nil
		})
	}()
	latecomer := <-created
	daemontest.WaitPod(t, c.Client, ns, "latecomer", "Running during the exec flood", daemontest.Running)
	t.Logf("a pod created during the flood was seen Running after %s", time.Since(latecomer).Round(10*time.Millisecond))
	<-flood
	all := time.Since(start)
	t.Logf("%d execs against %d pods in %s (%.0f/s), %d failed; each took %s", execs, pods, all.Round(time.Second), float64(execs)/all.Seconds(), failed, spread(took))
	if failed > 0 {
		stallOnce.Do(func() {}) // waits for a goroutines call under way
		t.Errorf("%d of %d execs failed, the first: %v", failed, execs, firstErr)
		t.Logf("goroutines %s into the first exec that took that long:\n%s", stalledAfter, stall)
	}
	checkMemory(t, pid, pods, fmt.Sprintf("after %d execs", execs))
	if _, peak := processMemory(t, pid); peak-before > floodGrowth {
		t.Errorf("the exec flood raised the daemon's peak memory from %d MiB to %d MiB", before>>20, peak>>20)
	}
	daemontest.CheckNoPanic(t, d)
}

// spread describes durations by their median, 99th percentile and maximum,
// which tell a slow machine (all three grow) from one stalled request.
func spread(d []time.Duration) string {
	s := slices.Clone(d)
	slices.Sort(s)
	at := func(q float64) time.Duration { return s[int(q*float64(len(s)-1))].Round(time.Millisecond) }
	return fmt.Sprintf("median %s, p99 %s, max %s", at(0.5), at(0.99), at(1))
}

// execTrue runs "true" in the pod's container through the API server, as
// kubectl exec does.
func execTrue(ctx context.Context, c *testcluster.Cluster, ns, pod string) error {
	req := c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "main", Command: []string{"true"}, Stdout: true}, scheme.ParameterCodec)
	exec, err := remotecommand.NewSPDYExecutor(c.Config, "POST", req.URL())
	if err != nil {
		return err
	}
	var out bytes.Buffer
	return exec.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: &out})
}
