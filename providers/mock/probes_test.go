package mock

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

func TestProbeScripts(t *testing.T) {
	for _, tc := range []struct {
		value string
		at    map[time.Duration]bool
	}{
		{"pass", map[time.Duration]bool{0: true, time.Hour: true}},
		{"fail", map[time.Duration]bool{0: false, time.Hour: false}},
		{"fail-for=10s", map[time.Duration]bool{0: false, 9 * time.Second: false, 10 * time.Second: true}},
		{"fail-after=30s", map[time.Duration]bool{0: true, 29 * time.Second: true, 30 * time.Second: false}},
		{"pass-for=5s, fail-for=5s", map[time.Duration]bool{0: true, 6 * time.Second: false, 10 * time.Second: true}},
	} {
		s, err := parseProbeScript(tc.value)
		if err != nil {
			t.Fatalf("%q: %v", tc.value, err)
		}
		for age, want := range tc.at {
			if got := s.passes(age); got != want {
				t.Errorf("%q at %s: passes %v, want %v", tc.value, age, got, want)
			}
		}
	}
}

func TestBadProbeScriptRejectsPod(t *testing.T) {
	p, _ := newProvider(t)
	for value, want := range map[string]string{
		"sometimes":     "want pass, fail or steps",
		"fail-for=soon": "positive duration",
		"fail-for=-1s":  "positive duration",
	} {
		pod := testPod("bad", map[string]string{AnnotationReadinessProbe + ".app": value}, corev1.RestartPolicyAlways)
		err := p.CreatePod(context.Background(), pod)
		if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), AnnotationReadinessProbe+".app") || !strings.Contains(err.Error(), want) {
			t.Errorf("%q: %v, want an invalid-input error naming the annotation and %q", value, err, want)
		}
	}
}

// TestProbeCommandAndKill: the `probe` command answers as scripted, and
// KillContainer stops the container with exit code 137; restartPolicy
// Always starts it again, counting the restart.
func TestProbeCommandAndKill(t *testing.T) {
	p, r := newProvider(t)
	ctx := context.Background()
	pod := testPod("web", map[string]string{AnnotationLivenessProbe: "fail", AnnotationRestartDelay: "10ms"}, corev1.RestartPolicyAlways)
	if err := p.CreatePod(ctx, pod); err != nil {
		t.Fatal(err)
	}
	run := func(cmd ...string) error { return p.RunInContainer(ctx, "ns", "web", "app", cmd, &fakeIO{}) }
	if err := run("probe", "readiness"); err != nil {
		t.Errorf("unscripted readiness: %v", err)
	}
	if err := run("probe", "liveness"); err == nil {
		t.Error("liveness scripted to fail passed")
	}
	if err := run("probe", "sideways"); err == nil {
		t.Error("an unknown probe kind passed")
	}
	if err := p.KillContainer(ctx, "ns", "web", "app", time.Second); err != nil {
		t.Fatal(err)
	}
	after := r.waitFor(t, "running again", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses[0]
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
	if last := after.Status.ContainerStatuses[0].LastTerminationState.Terminated; last == nil || last.ExitCode != exitCodeKilled {
		t.Errorf("last state %+v", after.Status.ContainerStatuses[0].LastTerminationState)
	}
	if err := p.KillContainer(ctx, "ns", "web", "nope", time.Second); !errdefs.IsNotFound(err) {
		t.Errorf("unknown container: %v", err)
	}
}
