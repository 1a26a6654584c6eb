package slurm

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// TestStopSignalOf: the API's signal names become Linux numbers, the
// real-time ones as C programs count them; a container without one has
// none, and a name Linux does not have is InvalidInput naming it.
func TestStopSignalOf(t *testing.T) {
	for sig, want := range map[corev1.Signal]string{
		corev1.SIGUSR1: "10", corev1.SIGTERM: "15", corev1.SIGKILL: "9", corev1.SIGQUIT: "3",
		"SIGRTMIN": "34", "SIGRTMIN+3": "37", "SIGRTMAX": "64", "SIGRTMAX-1": "63",
	} {
		c := corev1.Container{Name: "c", Lifecycle: &corev1.Lifecycle{StopSignal: ptr.To(sig)}}
		if got, err := stopSignalOf(&c); err != nil || got != want {
			t.Errorf("%s: %q, %v; want %s", sig, got, err, want)
		}
	}
	if got, err := stopSignalOf(&corev1.Container{Name: "c"}); got != "" || err != nil {
		t.Errorf("no stop signal: %q, %v", got, err)
	}
	for _, sig := range []corev1.Signal{"SIGNOPE", "SIGRTMIN+31", "SIGRTMIN-1", "SIGRTMAX+1", "SIGRTMIN+", "USR1", ""} {
		c := corev1.Container{Name: "c", Lifecycle: &corev1.Lifecycle{StopSignal: ptr.To(sig)}}
		if _, err := stopSignalOf(&c); !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), `lifecycle.stopSignal "`+string(sig)+`"`) {
			t.Errorf("%q: %v, want InvalidInput naming it", sig, err)
		}
	}
}
