package node

import (
	"context"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/clock"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/internal/prober"
)

// Reasons of the Events about probes: a probe failed (Unhealthy), its
// container is stopped for it (Killing), and one the node cannot run
// (ProbeUnsupported).
const (
	ReasonUnhealthy        = prober.ReasonUnhealthy
	ReasonKilling          = prober.ReasonKilling
	ReasonProbeUnsupported = prober.ReasonProbeUnsupported
)

// newProber returns the prober of a ProbeDelegator provider (nil for
// others), wired to its exec and ContainerKiller capabilities.
func newProber(pc *PodController) *prober.Manager {
	d := pc.caps.Probes
	if d == nil {
		return nil
	}
	cfg := prober.Config{
		Clock:      clock.RealClock{},
		PodNetwork: d.PodNetworkReachable(),
		Changed:    pc.probeChanged,
		Event: func(pod *corev1.Pod, eventType, reason, msg string) {
			pc.recorder.Event(pod, eventType, reason, msg)
		},
	}
	if ep := pc.caps.Exec; ep != nil {
		// Not traced as provider calls are: a failing probe's exit is no
		// provider failure to log every period.
		cfg.Exec = func(ctx context.Context, namespace, pod, container string, cmd []string, out io.Writer) error {
			return ep.RunInContainer(ctx, namespace, pod, container, cmd, probeIO{out})
		}
	}
	if k := pc.caps.Killer; k != nil {
		cfg.Kill = func(ctx context.Context, pod *corev1.Pod, container string, grace time.Duration) error {
			return pc.traceProvider(withPodFields(ctx, pod), "KillContainer", func(ctx context.Context) error {
				return k.KillContainer(ctx, pod.Namespace, pod.Name, container, grace)
			})
		}
	}
	return prober.New(cfg)
}

// probed is the provider's status of pod with the probes' verdicts on its
// containers' ready and started, for a ProbeDelegator; else status itself.
func (pc *PodController) probed(pod *corev1.Pod, status corev1.PodStatus) corev1.PodStatus {
	if pc.prober == nil {
		return status
	}
	return pc.prober.Observe(pod, status)
}

// probeChanged writes the pod's status again when a probe's result changed
// it: status, the provider's latest, is handed to the status queue unless a
// newer one waits there already.
func (pc *PodController) probeChanged(pod *corev1.Pod, status corev1.PodStatus) {
	key := podKey(pod)
	if rec := pc.pods.lookup(key); rec != nil {
		rec.probeChanged(withStatus(pod, status))
		pc.statusQueue.Enqueue(key)
	}
}

// probeIO is the AttachIO of an exec probe: no stdin or terminal, stdout
// and stderr both to the probe's output.
type probeIO struct{ out io.Writer }

func (p probeIO) Stdin() io.Reader            { return nil }
func (p probeIO) Stdout() io.WriteCloser      { return nopCloser{p.out} }
func (p probeIO) Stderr() io.WriteCloser      { return nopCloser{p.out} }
func (p probeIO) TTY() bool                   { return false }
func (p probeIO) Resize() <-chan api.TermSize { return nil }

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }
