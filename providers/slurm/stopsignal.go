package slurm

import (
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// A container's lifecycle.stopSignal is what its job sends the container's
// process when the pod is deleted, in place of TERM (see package
// internal/sandbox): the plan carries the signal's number. The pod's
// containerStatuses[].stopSignal is filled in by the library from the
// spec, as the kubelet reports the runtime's effective signal.

// Real-time signals as C programs number them: glibc keeps the kernel's
// first two for itself, so SIGRTMIN is 34, as container runtimes count.
const (
	sigRTMin = 34
	sigRTMax = 64
)

// stopSignalOf is the number of c's stop signal, empty when it sets none
// (the job sends TERM); a signal Linux does not have is InvalidInput.
func stopSignalOf(c *corev1.Container) (string, error) {
	if c.Lifecycle == nil || c.Lifecycle.StopSignal == nil {
		return "", nil
	}
	name := string(*c.Lifecycle.StopSignal)
	n, ok := signalNumber(name)
	if !ok {
		return "", errdefs.InvalidInputf("container %q: lifecycle.stopSignal %q is not a Linux signal", c.Name, name)
	}
	return strconv.Itoa(n), nil
}

// signalNumber is the Linux number of a signal named as the API names
// them: SIGUSR1, SIGRTMIN+3, SIGRTMAX-2.
func signalNumber(name string) (int, bool) {
	rt := func(base, sign int, rest string) (int, bool) {
		if rest == "" {
			return base, true
		}
		k, err := strconv.Atoi(rest[1:])
		if err != nil || (sign > 0) != (rest[0] == '+') || (sign < 0) != (rest[0] == '-') {
			return 0, false
		}
		n := base + sign*k
		return n, n >= sigRTMin && n <= sigRTMax
	}
	switch {
	case strings.HasPrefix(name, "SIGRTMIN"):
		return rt(sigRTMin, 1, strings.TrimPrefix(name, "SIGRTMIN"))
	case strings.HasPrefix(name, "SIGRTMAX"):
		return rt(sigRTMax, -1, strings.TrimPrefix(name, "SIGRTMAX"))
	}
	s := unix.SignalNum(name)
	return int(s), s != 0
}
