package mock

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/provider"
)

// newProviderWithConfig builds a provider from a config file with content.
func newProviderWithConfig(t *testing.T, content string) (*Provider, error) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "mock.json")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	p, err := New(context.Background(), provider.InitConfig{NodeName: "vk0", ConfigPath: path, InternalIP: "10.213.0.2"})
	if err != nil {
		return nil, err
	}
	return p.(*Provider), nil
}

// crash stops the provider's timers, as killing the daemon does.
func crash(p *Provider) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, ps := range p.pods {
		ps.stopTimers()
		ps.deleted = true
	}
}

func podNamed(t *testing.T, p *Provider, name string) *corev1.Pod {
	t.Helper()
	pod, err := p.GetPod(context.Background(), "ns", name)
	if err != nil {
		t.Fatalf("pod %s: %v", name, err)
	}
	return pod
}

// restartsBy is how many restarts a container that runs for runFor and
// backs off from delay has had d after it first started.
func restartsBy(d, runFor, delay time.Duration) int32 {
	n, at := int32(0), runFor
	for backOff := delay; ; backOff = min(2*backOff, MaxRestartBackOff) {
		if at += backOff; at > d {
			return n
		}
		n++
		at += runFor
	}
}

func TestStateDirKeepsPodsAcrossRestart(t *testing.T) {
	dir := t.TempDir()
	config := fmt.Sprintf(`{"vk0": {"stateDir": %q}}`, filepath.Join(dir, "state"))
	p, err := newProviderWithConfig(t, config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	for _, pod := range []*corev1.Pod{
		testPod("web", nil, corev1.RestartPolicyAlways),
		testPod("job", map[string]string{AnnotationRunFor: "300ms"}, corev1.RestartPolicyNever),
		testPod("slow", map[string]string{AnnotationStartDelay: "600ms"}, corev1.RestartPolicyAlways),
		testPod("crash", map[string]string{AnnotationRunFor: "40ms", AnnotationRestartDelay: "10ms", AnnotationExitCode: "1"}, corev1.RestartPolicyAlways),
		testPod("upgraded", nil, corev1.RestartPolicyAlways),
		testPod("gone", nil, corev1.RestartPolicyAlways),
	} {
		if err := p.CreatePod(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	upgrade := testPod("upgraded", map[string]string{"note": "v2"}, corev1.RestartPolicyAlways)
	upgrade.Spec.Containers[0].Image = "busybox:2"
	time.Sleep(50 * time.Millisecond)
	if err := p.UpdatePod(ctx, upgrade); err != nil {
		t.Fatal(err)
	}
	if err := p.DeletePod(ctx, testPod("gone", nil, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	before := map[string]*corev1.Pod{}
	for _, name := range []string{"web", "job", "slow", "crash", "upgraded"} {
		before[name] = podNamed(t, p, name)
	}
	time.Sleep(200 * time.Millisecond)
	crash(p)
	// Down long enough for the job to finish and the slow pod to start.
	time.Sleep(500 * time.Millisecond)

	restored := time.Now()
	q, err := newProviderWithConfig(t, config)
	if err != nil {
		t.Fatal(err)
	}
	pods, _ := q.GetPods(ctx)
	if len(pods) != 5 {
		t.Fatalf("%d pods after the restart, want 5 (the deleted one gone)", len(pods))
	}
	for name, old := range before {
		now := podNamed(t, q, name)
		if !now.Status.StartTime.Equal(old.Status.StartTime) || (old.Status.PodIP != "" && now.Status.PodIP != old.Status.PodIP) || now.UID != old.UID {
			t.Errorf("%s: start time %v ip %s uid %s, was %v %s %s", name, now.Status.StartTime, now.Status.PodIP, now.UID,
				old.Status.StartTime, old.Status.PodIP, old.UID)
		}
	}

	web, oldWeb := podNamed(t, q, "web").Status.ContainerStatuses[0], before["web"].Status.ContainerStatuses[0]
	// The replay starts it as it is created; the live start came a few
	// microseconds after.
	if web.State.Running == nil || web.State.Running.StartedAt.Sub(oldWeb.State.Running.StartedAt.Time).Abs() > time.Millisecond || web.RestartCount != 0 {
		t.Errorf("web: %+v, was %+v", web.State, oldWeb.State)
	}

	job := podNamed(t, q, "job")
	term := job.Status.ContainerStatuses[0].State.Terminated
	if job.Status.Phase != corev1.PodSucceeded || term == nil {
		t.Fatalf("job: %s %+v, want it finished while the daemon was down", job.Status.Phase, job.Status.ContainerStatuses[0].State)
	}
	// It finished when it would have, not when the provider came back.
	if ran := term.FinishedAt.Sub(term.StartedAt.Time); ran != 300*time.Millisecond {
		t.Errorf("job ran %s, want exactly its run-for of 300ms", ran)
	}

	slow := podNamed(t, q, "slow")
	running := slow.Status.ContainerStatuses[0].State.Running
	if slow.Status.Phase != corev1.PodRunning || running == nil || running.StartedAt.Sub(slow.Status.StartTime.Time) != 600*time.Millisecond {
		t.Errorf("slow: %s %+v, want started 600ms after its creation", slow.Status.Phase, slow.Status.ContainerStatuses[0].State)
	}

	// 40ms runs and back-offs doubling from 10ms: the replay restarted it
	// on schedule while the daemon was down, and it goes on now.
	created := before["crash"].Status.StartTime.Time
	crashed := podNamed(t, q, "crash").Status.ContainerStatuses[0]
	lo, hi := restartsBy(restored.Sub(created), 40*time.Millisecond, 10*time.Millisecond), restartsBy(time.Since(created), 40*time.Millisecond, 10*time.Millisecond)
	if was := before["crash"].Status.ContainerStatuses[0].RestartCount; crashed.RestartCount <= was || crashed.RestartCount < lo || crashed.RestartCount > hi {
		t.Errorf("crash: restart count %d, was %d before a ~700ms outage; the schedule says %d to %d", crashed.RestartCount, was, lo, hi)
	}
	waitRestarts := time.Now().Add(10 * time.Second)
	for podNamed(t, q, "crash").Status.ContainerStatuses[0].RestartCount == crashed.RestartCount && time.Now().Before(waitRestarts) {
		time.Sleep(10 * time.Millisecond)
	}
	if podNamed(t, q, "crash").Status.ContainerStatuses[0].RestartCount == crashed.RestartCount {
		t.Error("crash: the restored pod's timers do not run")
	}

	upgraded := podNamed(t, q, "upgraded")
	uc, oldUC := upgraded.Status.ContainerStatuses[0], before["upgraded"].Status.ContainerStatuses[0]
	if uc.Image != "busybox:2" || uc.RestartCount != 1 || upgraded.Annotations["note"] != "v2" {
		t.Errorf("upgraded: image %s restarts %d annotations %v, want the update kept", uc.Image, uc.RestartCount, upgraded.Annotations)
	}
	// Restarted when UpdatePod ran, recorded a moment later; not when the
	// provider came back, 700ms after.
	if d := uc.State.Running.StartedAt.Sub(oldUC.State.Running.StartedAt.Time).Abs(); d > 100*time.Millisecond {
		t.Errorf("upgraded: restarted at %v, was %v", uc.State.Running.StartedAt, oldUC.State.Running.StartedAt)
	}

	// New pods get addresses of their own.
	if err := q.CreatePod(ctx, testPod("new", nil, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	newIP := podNamed(t, q, "new").Status.PodIP
	for _, old := range before {
		if old.Status.PodIP == newIP {
			t.Errorf("new pod got %s, the address of %s", newIP, old.Name)
		}
	}
	crash(q)
}

func TestStateDirErrors(t *testing.T) {
	dir := t.TempDir()
	state := filepath.Join(dir, "state")
	config := fmt.Sprintf(`{"vk0": {"stateDir": %q}}`, state)
	p, err := newProviderWithConfig(t, config)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.CreatePod(context.Background(), testPod("web", nil, corev1.RestartPolicyAlways)); err != nil {
		t.Fatal(err)
	}
	crash(p)
	// A write the crash interrupted is dropped; the pod's file is intact.
	tmp := filepath.Join(state, "ns_web.json.tmp")
	if err := os.WriteFile(tmp, []byte(`{"pod": {`), 0o600); err != nil {
		t.Fatal(err)
	}
	q, err := newProviderWithConfig(t, config)
	if err != nil {
		t.Fatalf("an unfinished write: %v", err)
	}
	crash(q)
	if _, err := os.Stat(tmp); !os.IsNotExist(err) {
		t.Errorf("the unfinished write is still there: %v", err)
	}

	for name, content := range map[string]string{
		"ns_broken.json":   `{"pod": `,
		"ns_empty.json":    `{}`,
		"ns_badrun.json":   `{"pod": {"metadata": {"namespace": "ns", "name": "badrun", "annotations": {"mock.vkubelet.io/run-for": "soon"}}, "spec": {"containers": [{"name": "app"}]}}, "created": "2026-01-02T03:04:05Z"}`,
		"ns_noupdate.json": `{"pod": {"metadata": {"namespace": "ns", "name": "noupdate"}}, "created": "2026-01-02T03:04:05Z", "updates": [{}]}`,
	} {
		path := filepath.Join(state, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		_, err := newProviderWithConfig(t, config)
		if err == nil || !strings.Contains(err.Error(), path) || !strings.Contains(err.Error(), "remove the file") || !strings.Contains(err.Error(), "state directory") {
			t.Errorf("%s: %v, want an error naming the file", name, err)
		}
		_ = os.Remove(path)
	}

	notDir := filepath.Join(dir, "file")
	if err := os.WriteFile(notDir, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := newProviderWithConfig(t, fmt.Sprintf(`{"vk0": {"stateDir": %q}}`, notDir)); err == nil || !strings.Contains(err.Error(), notDir) {
		t.Errorf("a state directory that is a file: %v", err)
	}
}

func TestStructuredConfig(t *testing.T) {
	p, err := newProviderWithConfig(t, `{"vk0": {"capacity": {"cpu": "8", "nvidia.com/gpu": "2"}, "faults": {"fail-calls": "GetPods", "fail-for": "1h", "hang-calls": "GetPod", "hang-for": "1s"}}}`)
	if err != nil {
		t.Fatal(err)
	}
	if c := p.capacity; c.Cpu().String() != "8" || c.Memory().String() != "100Gi" {
		t.Errorf("capacity %v", c)
	}
	if f := p.faults.node; !f.fail.has(callGetPods) || f.fail.has(callCreatePod) || f.failFor != time.Hour || !f.hang.has(callGetPod) || f.hangFor != time.Second {
		t.Errorf("faults %+v", f)
	}
	if p.state != nil {
		t.Error("a state directory without stateDir")
	}
	for content, want := range map[string]string{
		`{"vk0": {"capacity": {"cpu": "x"}}}`:                     `node "vk0": capacity: cpu: invalid quantity "x"`,
		`{"vk0": {"capacity": "big"}}`:                            `node "vk0": capacity: must be an object`,
		`{"vk0": {"stateDir": ""}}`:                               `node "vk0": stateDir: must be a directory path`,
		`{"vk0": {"stateDir": "/tmp", "cpu": "8"}}`:               `node "vk0": unknown field "cpu": a structured entry has capacity, stateDir, faults, maxCopiedBytes, devices, runtimeFeatures (resources go under capacity)`,
		`{"vk0": {"faults": {"fail-calls": "Nope"}}}`:             `node "vk0": faults: fail-calls: "Nope" is not a provider call (a comma list of CreatePod, UpdatePod, DeletePod, GetPodStatus, GetPod, GetPods, or *)`,
		`{"vk0": {"faults": {"ignore-stop": "true"}}}`:            `node "vk0": faults: unknown setting "ignore-stop"`,
		`{"vk0": {"faults": {"fail-calls": "*", "fail-for": 3}}}`: `node "vk0": faults: must be an object of strings`,
	} {
		if _, err := newProviderWithConfig(t, content); err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("%s: %v, want %q", content, err, want)
		}
	}
}

func TestReplayClock(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	c := &replayClock{now: start}
	var fired []string
	var chained stoppable
	c.AfterFunc(3*time.Second, func() { fired = append(fired, "3s") })
	c.AfterFunc(time.Second, func() {
		fired = append(fired, "1s")
		// A timer set by a timer fires in order too.
		chained = c.AfterFunc(time.Second, func() { fired = append(fired, "2s") })
	})
	stopped := c.AfterFunc(2500*time.Millisecond, func() { fired = append(fired, "stopped") })
	if !stopped.Stop() {
		t.Error("Stop of a pending timer reported false")
	}
	late := c.AfterFunc(time.Hour, func() { fired = append(fired, "late") })
	c.runUntil(start.Add(5 * time.Second))
	if got := strings.Join(fired, ","); got != "1s,2s,3s" || !c.Now().Equal(start.Add(5*time.Second)) {
		t.Errorf("fired %s, now %v", got, c.Now())
	}
	if chained.Stop() {
		t.Error("Stop of a fired timer reported true")
	}
	done := make(chan struct{})
	late.(*replayTimer).f = func() { close(done) }
	// An hour of virtual time is due at once in real time when the
	// replay ends an hour late.
	c.handOver(start.Add(time.Hour))
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("the handed-over timer did not fire")
	}
	if late.Stop() {
		t.Error("Stop of a fired real timer reported true")
	}
}

// TestConfigNamePatterns: the nodes of --node-count share entries by shell
// pattern; an exact name wins, then the longest pattern; a stateDir under a
// pattern is one directory per node.
func TestConfigNamePatterns(t *testing.T) {
	path := filepath.Join(t.TempDir(), "mock.json")
	content := `{"vk-*": {"capacity": {"cpu": "4"}, "stateDir": "/var/lib/mock"}, "vk-1*": {"cpu": "16"}, "vk-7": {"cpu": "64"}}`
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	for node, want := range map[string]struct{ cpu, stateDir string }{
		"vk-0":  {"4", "/var/lib/mock/vk-0"},
		"vk-12": {"16", ""},
		"vk-7":  {"64", ""},
	} {
		cfg, err := loadConfig(path, node)
		if err != nil {
			t.Fatalf("%s: %v", node, err)
		}
		if cfg.capacity.Cpu().String() != want.cpu || cfg.stateDir != want.stateDir {
			t.Errorf("%s: cpu %s stateDir %q, want %s %q", node, cfg.capacity.Cpu(), cfg.stateDir, want.cpu, want.stateDir)
		}
	}
	if _, err := loadConfig(path, "other"); err == nil || !strings.Contains(err.Error(), `no entry for node "other"`) {
		t.Errorf("a node no entry matches: %v", err)
	}
}

// BenchmarkStateDir measures what a state directory costs: CreatePod with
// and without one, and a restart that restores b.N pods.
func BenchmarkStateDir(b *testing.B) {
	create := func(b *testing.B, config string) *Provider {
		path := filepath.Join(b.TempDir(), "mock.json")
		if err := os.WriteFile(path, []byte(config), 0o600); err != nil {
			b.Fatal(err)
		}
		p, err := New(context.Background(), provider.InitConfig{NodeName: "vk0", ConfigPath: path})
		if err != nil {
			b.Fatal(err)
		}
		return p.(*Provider)
	}
	pods := func(n int) []*corev1.Pod {
		out := make([]*corev1.Pod, n)
		for i := range out {
			out[i] = testPod(fmt.Sprintf("pod-%d", i), map[string]string{AnnotationRunFor: "1h"}, corev1.RestartPolicyAlways)
		}
		return out
	}
	for _, withState := range []bool{false, true} {
		b.Run(fmt.Sprintf("CreatePod/state=%v", withState), func(b *testing.B) {
			config := `{"vk0": {}}`
			if withState {
				config = fmt.Sprintf(`{"vk0": {"stateDir": %q}}`, b.TempDir())
			}
			p := create(b, config)
			all := pods(b.N)
			b.ResetTimer()
			for _, pod := range all {
				if err := p.CreatePod(context.Background(), pod); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			crash(p)
		})
	}
	b.Run("Restore", func(b *testing.B) {
		config := fmt.Sprintf(`{"vk0": {"stateDir": %q}}`, b.TempDir())
		p := create(b, config)
		for _, pod := range pods(b.N) {
			if err := p.CreatePod(context.Background(), pod); err != nil {
				b.Fatal(err)
			}
		}
		crash(p)
		b.ResetTimer()
		q := create(b, config)
		b.StopTimer()
		if len(q.pods) != b.N {
			b.Fatalf("restored %d pods of %d", len(q.pods), b.N)
		}
		crash(q)
	})
}

// A replica that takes over a node replays its pods from the shared state
// directory while the first still runs them: both must report the same
// start and finish times, to the nanosecond, or the API server sees the
// pod restart (a second boundary between the two is enough).
func TestReplayedTimesAreThoseThePodReported(t *testing.T) {
	config := fmt.Sprintf(`{"vk0": {"stateDir": %q}}`, filepath.Join(t.TempDir(), "state"))
	p, err := newProviderWithConfig(t, config)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	pods := []*corev1.Pod{
		testPod("now", nil, corev1.RestartPolicyAlways),
		testPod("delayed", map[string]string{AnnotationStartDelay: "30ms"}, corev1.RestartPolicyAlways),
		// Starts at 0, 60 and 170 ms, then 380: the first provider
		// stops at about 200, with room for a slow machine's sleeps and
		// the replica's start before the next change is due.
		testPod("restarting", map[string]string{AnnotationRunFor: "10ms", AnnotationRestartDelay: "50ms", AnnotationExitCode: "1"}, corev1.RestartPolicyAlways),
		testPod("updated", nil, corev1.RestartPolicyAlways),
	}
	for _, pod := range pods {
		if err := p.CreatePod(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(20 * time.Millisecond)
	upgrade := testPod("updated", nil, corev1.RestartPolicyAlways)
	upgrade.Spec.Containers[0].Image = "busybox:2"
	if err := p.UpdatePod(ctx, upgrade); err != nil {
		t.Fatal(err)
	}
	time.Sleep(180 * time.Millisecond)

	// The replica replays while the first provider's pods stand still.
	p.mu.Lock()
	defer p.mu.Unlock()
	q, err := newProviderWithConfig(t, config)
	if err != nil {
		t.Fatal(err)
	}
	defer crash(q)
	for _, pod := range pods {
		ran := p.pods[podKey("ns", pod.Name)].status()
		replayed, err := q.GetPodStatus(ctx, "ns", pod.Name)
		if err != nil {
			t.Fatal(err)
		}
		was, is := ran.ContainerStatuses[0], replayed.ContainerStatuses[0]
		if !sameState(was.State, is.State) || !sameState(was.LastTerminationState, is.LastTerminationState) {
			t.Errorf("%s: ran as %+v / last %+v, replayed as %+v / last %+v", pod.Name, was.State, was.LastTerminationState, is.State, is.LastTerminationState)
		}
	}
}

// sameState compares the times of two container states to the nanosecond.
func sameState(a, b corev1.ContainerState) bool {
	switch {
	case a.Running != nil && b.Running != nil:
		return a.Running.StartedAt.Equal(&b.Running.StartedAt)
	case a.Terminated != nil && b.Terminated != nil:
		return a.Terminated.StartedAt.Equal(&b.Terminated.StartedAt) && a.Terminated.FinishedAt.Equal(&b.Terminated.FinishedAt)
	case a.Waiting != nil && b.Waiting != nil:
		return a.Waiting.Reason == b.Waiting.Reason
	}
	return a.Running == nil && b.Running == nil && a.Terminated == nil && b.Terminated == nil && a.Waiting == nil && b.Waiting == nil
}

// BenchmarkGetPods lists a node's 100 running pods, as each node's provider
// resync does every minute: at 100,000 pods over 1,000 nodes, a thousand
// such lists a minute.
func BenchmarkGetPods(b *testing.B) {
	p := providerRunning(b, 100)
	b.ReportAllocs()
	for b.Loop() {
		pods, err := p.GetPods(context.Background())
		if err != nil || len(pods) != 100 {
			b.Fatalf("%d pods, %v", len(pods), err)
		}
	}
}

// providerRunning returns a mock provider of node vk0 running n pods.
func providerRunning(b *testing.B, n int) *Provider {
	p, err := New(context.Background(), provider.InitConfig{NodeName: "vk0", InternalIP: "10.213.0.2"})
	if err != nil {
		b.Fatal(err)
	}
	for i := range n {
		if err := p.CreatePod(context.Background(), testPod(fmt.Sprintf("pod-%d", i), nil, corev1.RestartPolicyAlways)); err != nil {
			b.Fatal(err)
		}
	}
	return p.(*Provider)
}
