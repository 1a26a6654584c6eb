package mock

import (
	"context"
	"fmt"
	"strings"
	"time"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// Annotations that script the outcome of the mock's `probe` command, which a
// container's exec probe runs (command: ["probe", "readiness"]): the mock
// runs no probes itself, the pod controller runs them (node.ProbeDelegator).
// Each may be given for one container by appending "." and its name.
//
// A value is "pass", "fail", or a list of steps timed from the start of the
// container's current run, "pass-for=DURATION" or "fail-for=DURATION",
// separated by commas; after the last step the outcome flips. So
// "fail-for=10s" fails for the first 10 s of each run and passes after, and
// "fail-after=30s" (the same as "pass-for=30s") passes for 30 s and fails
// from then on. Without an annotation, `probe` passes.
const (
	AnnotationReadinessProbe = "mock.vkubelet.io/readiness-probe"
	AnnotationLivenessProbe  = "mock.vkubelet.io/liveness-probe"
	AnnotationStartupProbe   = "mock.vkubelet.io/startup-probe"
)

// exitCodeKilled is what a container stopped for a failed probe exits with
// (SIGKILL), as runtimes report it.
const exitCodeKilled = 137

var (
	_ node.ProbeDelegator  = (*Provider)(nil)
	_ node.ContainerKiller = (*Provider)(nil)
)

// probeStep is one step of a probe script: the outcome for a while.
type probeStep struct {
	pass  bool
	lasts time.Duration
}

// probeScript is the scripted outcome of one kind of probe; empty passes.
type probeScript []probeStep

// probeScripts are a container's probe scripts, by kind as the `probe`
// command names it.
type probeScripts map[string]probeScript

// probeAnnotations maps the `probe` command's argument to its annotation.
var probeAnnotations = map[string]string{
	"readiness": AnnotationReadinessProbe,
	"liveness":  AnnotationLivenessProbe,
	"startup":   AnnotationStartupProbe,
}

// parseProbeScripts reads a container's probe scripts with get (the
// container's annotation, else the pod's). A bad value is an InvalidInput
// error naming the annotation.
func parseProbeScripts(get func(key string) (string, string, bool)) (probeScripts, error) {
	var out probeScripts
	for kind, key := range probeAnnotations {
		name, v, ok := get(key)
		if !ok {
			continue
		}
		s, err := parseProbeScript(v)
		if err != nil {
			return nil, errdefs.InvalidInputf("annotation %s: %q: %v", name, v, err)
		}
		if out == nil {
			out = probeScripts{}
		}
		out[kind] = s
	}
	return out, nil
}

func parseProbeScript(v string) (probeScript, error) {
	switch strings.TrimSpace(v) {
	case "pass":
		return nil, nil
	case "fail":
		return probeScript{{pass: false, lasts: -1}}, nil
	}
	var s probeScript
	for _, part := range strings.Split(v, ",") {
		what, d, ok := strings.Cut(strings.TrimSpace(part), "=")
		var step probeStep
		switch what {
		case "pass-for", "fail-after":
			step.pass = true
		case "fail-for":
		default:
			return nil, fmt.Errorf("want pass, fail or steps like fail-for=10s, pass-for=5s, fail-after=30s, separated by commas; %q is none", part)
		}
		dur, err := time.ParseDuration(d)
		if !ok || err != nil || dur <= 0 {
			return nil, fmt.Errorf("%s needs a positive duration such as 10s, not %q", what, d)
		}
		step.lasts = dur
		s = append(s, step)
	}
	return s, nil
}

// passes reports the scripted outcome at age into the container's run.
func (s probeScript) passes(age time.Duration) bool {
	for _, step := range s {
		if step.lasts < 0 || age < step.lasts {
			return step.pass
		}
		age -= step.lasts
	}
	return len(s) == 0 || !s[len(s)-1].pass
}

// probe is the `probe KIND` built-in: exit 0 when the container's script
// for that kind passes now, 1 when it fails.
func (s *session) probe(args []string) int {
	if len(args) != 1 || probeAnnotations[args[0]] == "" {
		fmt.Fprintln(s.stderr, "usage: probe readiness|liveness|startup")
		return 2
	}
	if s.probes[args[0]].passes(s.now().Sub(s.runStart)) {
		fmt.Fprintf(s.stdout, "%s probe passes\n", args[0])
		return 0
	}
	fmt.Fprintf(s.stdout, "%s probe fails (scripted by %s)\n", args[0], probeAnnotations[args[0]])
	return 1
}

// PodNetworkReachable implements node.ProbeDelegator: the mock's pod IPs
// are addresses in no network, so only exec probes can be run.
func (p *Provider) PodNetworkReachable() bool { return false }

// KillContainer implements node.ContainerKiller: the container stops at
// once, killed (exit code 137), and restarts as the pod's restartPolicy
// says, after the usual back-off.
func (p *Provider) KillContainer(ctx context.Context, namespace, podName, containerName string, _ time.Duration) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, c, err := p.lookup(namespace, podName, containerName)
	if err != nil {
		return err
	}
	if c.status.State.Running == nil {
		return errNotRunning(c)
	}
	c.stopTimer()
	now := p.clock.Now()
	c.instances[len(c.instances)-1].end = now
	ps.terminated(c, exitCodeKilled, "Error", "", now)
	p.changed(ps)
	return nil
}
