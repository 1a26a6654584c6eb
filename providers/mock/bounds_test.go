package mock

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
	"unicode/utf8"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
	utilexec "k8s.io/utils/exec"

	"github.com/vkubelet/virtual-kubelet/provider"
)

// boundedProvider is a mock for node vk0 told its pod controller has
// workers workers, with the provider config config (none if empty); its
// Events go to the returned recorder.
func boundedProvider(t *testing.T, workers int, config string) (*Provider, *record.FakeRecorder) {
	t.Helper()
	events := record.NewFakeRecorder(100)
	ic := provider.InitConfig{NodeName: "vk0", OperatingSystem: "linux", EventRecorder: events, PodSyncWorkers: workers}
	if config != "" {
		ic.ConfigPath = filepath.Join(t.TempDir(), "mock.json")
		if err := os.WriteFile(ic.ConfigPath, []byte(config), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	p, err := New(context.Background(), ic)
	if err != nil {
		t.Fatal(err)
	}
	p.(*Provider).NotifyPods(context.Background(), (&recorder{}).record)
	return p.(*Provider), events
}

// nextEvent is the next Event recorded, or "" if none comes within a second.
func nextEvent(events *record.FakeRecorder) string {
	select {
	case e := <-events.Events:
		return e
	case <-time.After(time.Second):
		return ""
	}
}

func (f *faults) hangingNow() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.hanging
}

// TestHangingCallsAreBoundedPerNode: pods' hang-calls hold at most a
// quarter of the node's pod-sync workers; a call past that runs at once,
// does its work, and its pod gets a Warning Event naming the bound. The
// control: with a place free, the same call does hang.
func TestHangingCallsAreBoundedPerNode(t *testing.T) {
	p, events := boundedProvider(t, 8, "") // two may hang
	hangs := map[string]string{AnnotationHangCalls: "CreatePod"}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	held := make(chan error, 2)
	for _, name := range []string{"hold-1", "hold-2"} {
		go func() { held <- p.CreatePod(ctx, testPod(name, hangs, corev1.RestartPolicyAlways)) }()
	}
	deadline := time.Now().Add(5 * time.Second)
	for p.faults.hangingNow() < 2 && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if n := p.faults.hangingNow(); n != 2 {
		t.Fatalf("%d calls hang, want the two the bound allows", n)
	}

	// The attack: a third pod's hanging call would hold a third worker.
	start := time.Now()
	if err := p.CreatePod(context.Background(), testPod("third", hangs, corev1.RestartPolicyAlways)); err != nil {
		t.Fatalf("CreatePod past the bound: %v, want it done at once", err)
	}
	if took := time.Since(start); took > time.Second {
		t.Errorf("CreatePod past the bound took %s, want it at once", took)
	}
	if _, err := p.GetPod(context.Background(), "ns", "third"); err != nil {
		t.Errorf("the refused hang's call did not do its work: %v", err)
	}
	want := fmt.Sprintf("Warning %s CreatePod ran at once instead of hanging as annotation %s asks: node vk0 lets at most 2 calls hang at a time (a quarter of its 8 pod-sync workers",
		ReasonHangRefused, AnnotationHangCalls)
	if e := nextEvent(events); !strings.HasPrefix(e, want) {
		t.Errorf("Event %q, want it to start %q", e, want)
	}

	// The provider config's hangs are the operator's: not bounded.
	p.faults.node = faultSpec{hang: callSet(callGetPod), hangFor: 50 * time.Millisecond}
	start = time.Now()
	if _, err := p.GetPod(context.Background(), "ns", "third"); err != nil || time.Since(start) < 50*time.Millisecond {
		t.Errorf("GetPod under the config's hang: %v after %s, want it to hang 50ms", err, time.Since(start))
	}
	p.faults.node = faultSpec{}

	// A hang that ends frees its place, and the next pod's call hangs.
	cancel()
	for range 2 {
		if err := <-held; !errors.Is(err, context.Canceled) {
			t.Errorf("a held CreatePod: %v, want its context's error", err)
		}
	}
	if n := p.faults.hangingNow(); n != 0 {
		t.Errorf("%d calls hang after theirs ended", n)
	}
	short, stop := context.WithTimeout(context.Background(), 100*time.Millisecond)
	defer stop()
	if err := p.CreatePod(short, testPod("fourth", hangs, corev1.RestartPolicyAlways)); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("CreatePod with a place free: %v, want it to hang until its deadline", err)
	}
	if e := nextEvent(events); e != "" {
		t.Errorf("an Event for a hang within the bound: %q", e)
	}
}

// TestHangBoundIsAQuarterOfTheWorkers: fewer than four workers leave no
// room for a hang; a provider not told its workers (a plugin) allows one.
func TestHangBoundIsAQuarterOfTheWorkers(t *testing.T) {
	for workers, want := range map[int]int{0: 1, 1: 0, 2: 0, 3: 0, 4: 1, 50: 12} {
		if got := newFaults("vk0", faultSpec{}, workers, podEvents{}).maxHanging; got != want {
			t.Errorf("%d workers: %d may hang, want %d", workers, got, want)
		}
	}
	// Two workers, as each node of --node-count 25 has: the pod's hang is
	// refused, the other worker never waits behind it.
	p, events := boundedProvider(t, 2, "")
	pod := testPod("slow", map[string]string{AnnotationHangCalls: "CreatePod,DeletePod", AnnotationHangFor: "1m"}, corev1.RestartPolicyAlways)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := p.DeletePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if e := nextEvent(events); !strings.Contains(e, "node vk0 lets at most 0 calls hang at a time (a quarter of its 2 pod-sync workers") {
			t.Errorf("Event %q, want the refusal naming the bound", e)
		}
	}
}

// copyInto runs kubectl cp's tar into the pod's container with a file of
// size bytes; it returns tar's stderr and exit error.
func copyInto(p *Provider, pod, name string, size int64) (string, error) {
	stderr := &closeBuffer{}
	in := tarStream(name, size)
	defer in.Close()
	err := p.RunInContainer(context.Background(), "ns", pod, "app", []string{"tar", "-xmf", "-", "-C", "/srv"}, &fakeIO{stdin: in, stdout: &closeBuffer{}, stderr: stderr})
	return stderr.String(), err
}

// TestCopiesAreBoundedPerNode: the files copied into a node's containers
// hold at most the config's maxCopiedBytes together; a copy past it is
// refused before it is read, with a message and an Event naming the bound,
// and a deleted pod gives its files' room back.
func TestCopiesAreBoundedPerNode(t *testing.T) {
	p, events := boundedProvider(t, 50, `{"vk0": {"maxCopiedBytes": "1Mi"}}`)
	ctx := context.Background()
	a, b := testPod("a", nil, corev1.RestartPolicyAlways), testPod("b", nil, corev1.RestartPolicyAlways)
	for _, pod := range []*corev1.Pod{a, b} {
		if err := p.CreatePod(ctx, pod); err != nil {
			t.Fatal(err)
		}
	}
	const size = 600 << 10 // each fits in its container; two do not fit in the node
	if stderr, err := copyInto(p, "a", "a.bin", size); err != nil {
		t.Fatalf("the first copy: %v %q", err, stderr)
	}

	stderr, err := copyInto(p, "b", "b.bin", size)
	taken := bytesQuantity(fileCost("/srv/a.bin", size))
	want := "tar: /srv/b.bin: node vk0 holds at most 1Mi copied into its containers (maxCopiedBytes in the provider config), and " + taken + " of it is taken\n"
	if exit, ok := err.(utilexec.CodeExitError); !ok || exit.Code != 2 || stderr != want {
		t.Errorf("a copy past the node's bound: %v, stderr %q; want exit 2 and %q", err, stderr, want)
	}
	wantEvent := "Warning " + ReasonCopyRefused + " kubectl cp refused: " + strings.TrimSuffix(strings.TrimPrefix(want, "tar: "), "\n")
	if e := nextEvent(events); e != wantEvent {
		t.Errorf("Event %q, want %q", e, wantEvent)
	}
	p.mu.Lock()
	fsB := p.pods["ns/b"].containers[0].fs
	p.mu.Unlock()
	if used, pending, held := fsB.holds(); used != 0 || pending != 0 || held != fileCost("/srv/a.bin", size) {
		t.Errorf("after the refusal b holds %d and reserves %d, the node %d; want only a's file held", used, pending, held)
	}

	// a's pod gone, its room is the node's again.
	if err := p.DeletePod(ctx, a); err != nil {
		t.Fatal(err)
	}
	if stderr, err := copyInto(p, "b", "b.bin", size); err != nil {
		t.Errorf("the copy once a is gone: %v %q", err, stderr)
	}
	if _, _, held := fsB.holds(); held != fileCost("/srv/b.bin", size) {
		t.Errorf("the node holds %d, want b's file alone", held)
	}
}

// TestCopyIntoAGonePodIsDropped: a copy still being read when its pod is
// deleted is not kept, and holds nothing of the node's.
func TestCopyIntoAGonePodIsDropped(t *testing.T) {
	p, _ := boundedProvider(t, 50, "")
	pod := testPod("web", nil, corev1.RestartPolicyAlways)
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	fs := &containerFS{node: p.copies}
	p.pods["ns/web"].containers[0].fs = fs
	p.mu.Unlock()
	r, err := fs.reserve("/srv/x", 10)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.DeletePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if err := fs.commit(r, make([]byte, 10), 0o644); err == nil || !strings.Contains(err.Error(), "pod is gone") {
		t.Errorf("commit after the pod went: %v", err)
	}
	if used, pending, held := fs.holds(); used != 0 || pending != 0 || held != 0 {
		t.Errorf("a gone pod's container holds %d, reserves %d, the node %d", used, pending, held)
	}
	if _, err := fs.reserve("/srv/y", 10); err == nil {
		t.Error("a copy into a gone pod's container was let in")
	}
}

func TestMaxCopiedBytesConfig(t *testing.T) {
	dir := t.TempDir()
	for value, want := range map[string]string{
		`"2Gi"`: "", `"0"`: "not a positive whole number", `"-1Mi"`: "not a positive whole number", `"0.5"`: "not a positive whole number",
		`1024`: `must be a quantity string such as "256Mi", got 1024`, `"lots"`: `invalid quantity "lots"`, `"9Ei"`: "below 8Ei",
	} {
		path := filepath.Join(dir, "mock.json")
		if err := os.WriteFile(path, []byte(`{"vk0": {"maxCopiedBytes": `+value+`}}`), 0o600); err != nil {
			t.Fatal(err)
		}
		cfg, err := loadConfig(path, "vk0")
		switch {
		case want == "" && (err != nil || cfg.copiedBytes != 2<<30):
			t.Errorf("maxCopiedBytes %s: %d, %v", value, cfg.copiedBytes, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), `node "vk0": maxCopiedBytes: `) || !strings.Contains(err.Error(), want)):
			t.Errorf("maxCopiedBytes %s: %v, want an error naming the field and saying %q", value, err, want)
		}
	}
	if cfg, err := loadConfig("", "vk0"); err != nil || cfg.copiedBytes != DefaultNodeCopiedBytes {
		t.Errorf("default: %d, %v; want %d", cfg.copiedBytes, err, DefaultNodeCopiedBytes)
	}
}

// holds is what the container's files cost, what its copies being read
// reserve, and what the node's containers hold together.
func (f *containerFS) holds() (used, pending, node int64) {
	f.mu.Lock()
	used, pending = f.used, f.pending
	f.mu.Unlock()
	f.node.mu.Lock()
	defer f.node.mu.Unlock()
	return used, pending, f.node.held
}

// TestEventMessageIsBounded: a message quoting a name as long as a tar
// header allows is cut to maxEventMessage, still valid UTF-8.
func TestEventMessageIsBounded(t *testing.T) {
	events := record.NewFakeRecorder(1)
	podEvents{recorder: events}.warn("ns", "web", "uid", ReasonCopyRefused, strings.Repeat("é", 4000))
	e := nextEvent(events)
	if msg := strings.TrimPrefix(e, "Warning "+ReasonCopyRefused+" "); len(msg) > maxEventMessage || !strings.HasSuffix(msg, "...") || !utf8.ValidString(msg) {
		t.Errorf("Event of %d bytes %q, want at most %d, valid, marked cut", len(msg), msg, maxEventMessage)
	}
}
