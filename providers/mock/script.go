package mock

import (
	"math"
	"strconv"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// Pod annotations that script what the mock does with a pod. Each may also be
// given for one container by appending "." and the container's name, e.g.
// mock.vkubelet.io/exit-code.worker: "3".
const (
	// AnnotationStartDelay keeps the pod Pending (ContainerCreating) for a
	// duration before its containers start, e.g. "2s".
	AnnotationStartDelay = "mock.vkubelet.io/start-delay"
	// AnnotationRunFor makes containers exit after running for a duration,
	// e.g. "30s", at least MinRunFor. Without it they run until the pod is
	// deleted.
	AnnotationRunFor = "mock.vkubelet.io/run-for"
	// AnnotationExitCode is the exit code of a container that exits
	// (default 0). Whether it restarts follows the pod's restartPolicy;
	// the pod ends Succeeded or Failed accordingly.
	AnnotationExitCode = "mock.vkubelet.io/exit-code"
	// AnnotationFailStart makes containers fail to start, with the value as
	// the message: terminated with reason StartError and exit code 128.
	AnnotationFailStart = "mock.vkubelet.io/fail-start"
	// AnnotationRestartDelay is the first back-off before a container
	// restarts (default 1s, at least MinRestartDelay); as the kubelet's, it
	// doubles with each restart up to MaxRestartBackOff and starts over
	// after a run of twice that. RestartCount grows with each restart.
	AnnotationRestartDelay = "mock.vkubelet.io/restart-delay"
	// AnnotationCPUUsage is the CPU a container uses, e.g. "250m", reported
	// in stats (kubectl top).
	AnnotationCPUUsage = "mock.vkubelet.io/cpu-usage"
	// AnnotationMemoryUsage is the memory a container uses, e.g. "64Mi".
	AnnotationMemoryUsage = "mock.vkubelet.io/memory-usage"
	// AnnotationLogInterval is how often a container writes a log line
	// (default 1s, at least MinLogInterval).
	AnnotationLogInterval = "mock.vkubelet.io/log-interval"
)

// The shortest scripted durations. Shorter ones would let one pod author
// spend the node: a log line or a restart every nanosecond.
const (
	// MinRunFor is the shortest AnnotationRunFor.
	MinRunFor = 10 * time.Millisecond
	// MinRestartDelay is the shortest AnnotationRestartDelay.
	MinRestartDelay = 10 * time.Millisecond
	// MinLogInterval is the shortest AnnotationLogInterval: 100 lines a
	// second.
	MinLogInterval = 10 * time.Millisecond
)

// exitCodeStartError is what runtimes report for a container that could not start.
const exitCodeStartError = 128

// script is the scripted behaviour of one container.
type script struct {
	startDelay   time.Duration
	runFor       time.Duration // 0: run until deleted
	exitCode     int32
	failStart    string // non-empty: fail to start with this message
	restartDelay time.Duration
	// nanoCores and memory are the scripted usage (AnnotationCPUUsage,
	// AnnotationMemoryUsage), kept as the figures the stats report rather
	// than as quantities, which cost five times the bytes.
	nanoCores   uint64
	memory      uint64
	logInterval time.Duration
	probes      probeScripts // see probes.go
}

// podScripts are the scripts of a pod's init and app containers.
type podScripts struct {
	init, containers []script
}

// parseScripts reads the scripts of every container of the pod.
func parseScripts(pod *corev1.Pod) (podScripts, error) {
	var ps podScripts
	if _, err := parseResizeScript(pod.Annotations); err != nil {
		return ps, err
	}
	for _, c := range pod.Spec.InitContainers {
		s, err := parseScript(pod, c.Name)
		if err != nil {
			return ps, err
		}
		ps.init = append(ps.init, s)
	}
	for _, c := range pod.Spec.Containers {
		s, err := parseScript(pod, c.Name)
		if err != nil {
			return ps, err
		}
		ps.containers = append(ps.containers, s)
	}
	return ps, nil
}

// parseScript reads a container's script from the pod's annotations. A bad
// value is an InvalidInput error naming the annotation: the pod is rejected.
func parseScript(pod *corev1.Pod, container string) (script, error) {
	s := script{restartDelay: time.Second, logInterval: time.Second}
	get := func(key string) (string, string, bool) {
		if v, ok := pod.Annotations[key+"."+container]; ok {
			return key + "." + container, v, true
		}
		v, ok := pod.Annotations[key]
		return key, v, ok
	}
	duration := func(key string, dst *time.Duration, minimum time.Duration) error {
		name, v, ok := get(key)
		if !ok {
			return nil
		}
		d, err := parseDuration(name, v, minimum)
		if err == nil {
			*dst = d
		}
		return err
	}
	// usage reads a quantity as a whole number of unit (resource.Nano for
	// nanocores, 0 for bytes), at most math.MaxInt64 of them: Quantity's
	// figures wrap beyond that, and the stats would report garbage.
	usage := func(key string, dst *uint64, unit resource.Scale) error {
		name, v, ok := get(key)
		if !ok {
			return nil
		}
		q, err := resource.ParseQuantity(v)
		if err != nil || q.Sign() < 0 {
			return errdefs.InvalidInputf("annotation %s: %q is not a valid quantity (e.g. 250m, 64Mi)", name, v)
		}
		if limit := resource.NewScaledQuantity(math.MaxInt64, unit); q.Cmp(*limit) > 0 {
			return errdefs.InvalidInputf("annotation %s: %q is above the maximum of %s", name, v, limit)
		}
		*dst = uint64(q.ScaledValue(unit))
		return nil
	}
	for _, err := range []error{
		duration(AnnotationStartDelay, &s.startDelay, 0),
		duration(AnnotationRunFor, &s.runFor, MinRunFor),
		duration(AnnotationRestartDelay, &s.restartDelay, MinRestartDelay),
		duration(AnnotationLogInterval, &s.logInterval, MinLogInterval),
		usage(AnnotationCPUUsage, &s.nanoCores, resource.Nano),
		usage(AnnotationMemoryUsage, &s.memory, 0),
	} {
		if err != nil {
			return s, err
		}
	}
	if name, v, ok := get(AnnotationExitCode); ok {
		code, err := strconv.ParseInt(v, 10, 32)
		if err != nil || code < 0 || code > 255 {
			return s, errdefs.InvalidInputf("annotation %s: %q is not an exit code (0-255)", name, v)
		}
		s.exitCode = int32(code)
	}
	probes, err := parseProbeScripts(get)
	if err != nil {
		return s, err
	}
	s.probes = probes
	if _, v, ok := get(AnnotationFailStart); ok {
		s.failStart = v
		if s.failStart == "" {
			s.failStart = "scripted start failure"
		}
	}
	return s, nil
}

// parseDuration reads the duration v of annotation name, at least minimum.
func parseDuration(name, v string, minimum time.Duration) (time.Duration, error) {
	d, err := time.ParseDuration(v)
	if err != nil || d < 0 {
		return 0, errdefs.InvalidInputf("annotation %s: %q is not a valid duration (e.g. 1.5s, 2m)", name, v)
	}
	if d < minimum {
		return 0, errdefs.InvalidInputf("annotation %s: %q is below the minimum of %s", name, v, minimum)
	}
	return d, nil
}
