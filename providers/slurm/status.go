package slurm

import (
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

// Job states, as squeue names them.
const (
	statePending   = "PENDING"
	stateRunning   = "RUNNING"
	stateTimeout   = "TIMEOUT"
	stateOOM       = "OUT_OF_MEMORY"
	stateCancelled = "CANCELLED"
	statePreempted = "PREEMPTED"
	stateDeadline  = "DEADLINE"
)

// maxUnixTime is the first second of year 10000, past what RFC 3339 holds.
const maxUnixTime = 253402300800

// jobDone reports whether a job state is final.
func jobDone(state string) bool {
	switch state {
	case statePending, stateRunning, "CONFIGURING", "COMPLETING", "SUSPENDED", "REQUEUED", "RESIZING", "SIGNALING", "STAGE_OUT":
		return false
	}
	return true
}

// containerFiles is what a container's files in the pod directory say.
type containerFiles struct {
	started  time.Time // zero until bwrap reported its child
	finished time.Time // zero until the exit file is written
	exitCode int
}

// readContainerFiles reads the info and exit files of a container.
func readContainerFiles(dir, name string) containerFiles {
	var f containerFiles
	c := filepath.Join(dir, "c", name)
	if st, err := os.Lstat(filepath.Join(c, "info")); err == nil && st.Mode().IsRegular() && st.Size() > 0 {
		f.started = st.ModTime()
	}
	// The files are the tenant's: read without following a link or
	// waiting on a fifo.
	exit, err := sandbox.OpenRegular(filepath.Join(c, "exit"))
	if err != nil {
		return f
	}
	defer exit.Close()
	data := make([]byte, 16)
	n, _ := exit.Read(data)
	if code, err := strconv.Atoi(strings.TrimSpace(string(data[:n]))); err == nil {
		f.exitCode = code
		if st, err := exit.Stat(); err == nil {
			f.finished = st.ModTime()
		}
	}
	return f
}

// jobView is what the status is computed from: the job as squeue last
// listed it, whether squeue no longer lists it, and each container's files.
type jobView struct {
	gone bool
	// pastDeadline is set once the pod ran longer than its
	// activeDeadlineSeconds and the provider stopped the job.
	pastDeadline bool
	// evicted says why the provider evicted the pod; empty while it has
	// not.
	evicted string
	job     *job
	files   map[string]containerFiles
	podIP   string
}

// podStatus is the pod's status as a kubelet would report it.
func podStatus(pod *corev1.Pod, v jobView) corev1.PodStatus {
	s := corev1.PodStatus{Phase: corev1.PodPending, HostIP: v.podIP, PodIP: v.podIP}
	if v.podIP != "" {
		s.HostIPs = []corev1.HostIP{{IP: v.podIP}}
		s.PodIPs = []corev1.PodIP{{IP: v.podIP}}
	}
	state, reason := "", ""
	if v.job != nil {
		state, reason = v.job.State, v.job.Reason
		// A start past year 9999 cannot be written as RFC 3339: the API
		// server would refuse the status.
		if v.job.StartTime > 0 && v.job.StartTime < maxUnixTime && state != statePending {
			t := metav1.NewTime(time.Unix(v.job.StartTime, 0))
			s.StartTime = &t
		}
	}
	// A kubelet fails a pod at its deadline, before its containers are
	// killed; so does the provider, whatever the containers report since.
	timedOut := v.pastDeadline || state == stateTimeout || state == stateDeadline
	done := v.gone || timedOut || v.evicted != "" || (v.job != nil && jobDone(state))

	held := state == statePending && jobHeld(reason)

	// Why a container that never wrote its exit file ended.
	lostReason, lostMessage := "Error", "the job ended (Slurm state "+state+") before the container exited"
	switch {
	case timedOut:
		lostReason, lostMessage = "DeadlineExceeded", "the pod reached its active deadline"
	case v.evicted != "":
		lostReason, lostMessage = "Evicted", v.evicted
	case state == stateOOM:
		lostReason, lostMessage = "OOMKilled", "the job ran out of memory"
	case state == "":
		lostReason, lostMessage = "ContainerStatusUnknown", "the job is no longer known to Slurm"
	}

	// After a failed init container the others never start: they stay
	// waiting, as on a kubelet.
	initFailed := false
	for _, c := range pod.Spec.InitContainers {
		f := v.files[c.Name]
		initFailed = initFailed || (!f.finished.IsZero() && f.exitCode != 0)
	}

	status := func(c *corev1.Container, waiting string) corev1.ContainerStatus {
		cs := corev1.ContainerStatus{Name: c.Name, Image: c.Image, ImageID: c.Image}
		f := v.files[c.Name]
		switch {
		case !f.finished.IsZero():
			r := "Completed"
			if f.exitCode != 0 {
				r = "Error"
			}
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: int32(f.exitCode), Reason: r,
				StartedAt: metav1.NewTime(f.started), FinishedAt: metav1.NewTime(f.finished)}
		case done && !(initFailed && f.started.IsZero()):
			cs.State.Terminated = &corev1.ContainerStateTerminated{ExitCode: 137, Reason: lostReason, Message: lostMessage,
				StartedAt: metav1.NewTime(f.started)}
		case !f.started.IsZero():
			started := true
			cs.Started, cs.Ready = &started, true
			cs.State.Running = &corev1.ContainerStateRunning{StartedAt: metav1.NewTime(f.started)}
		case held:
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: ReasonJobHeld, Message: heldMessage(v.job)}
		default:
			msg := ""
			if state == statePending {
				msg = "the job is pending in Slurm: " + reason
			}
			cs.State.Waiting = &corev1.ContainerStateWaiting{Reason: waiting, Message: msg}
		}
		return cs
	}

	initDone := true
	for i := range pod.Spec.InitContainers {
		cs := status(&pod.Spec.InitContainers[i], "PodInitializing")
		initDone = initDone && cs.State.Terminated != nil && cs.State.Terminated.ExitCode == 0
		s.InitContainerStatuses = append(s.InitContainerStatuses, cs)
	}
	waiting := "ContainerCreating"
	if !initDone {
		waiting = "PodInitializing"
	}
	allExited, allZero, anyStarted := true, true, false
	for i := range pod.Spec.Containers {
		cs := status(&pod.Spec.Containers[i], waiting)
		t := cs.State.Terminated
		allExited = allExited && t != nil
		allZero = allZero && t != nil && t.ExitCode == 0
		anyStarted = anyStarted || cs.State.Running != nil || t != nil
		s.ContainerStatuses = append(s.ContainerStatuses, cs)
	}

	switch {
	case timedOut:
		s.Phase, s.Reason, s.Message = corev1.PodFailed, "DeadlineExceeded", "Pod was active on the node longer than the specified deadline"
	case v.evicted != "":
		s.Phase, s.Reason, s.Message = corev1.PodFailed, "Evicted", v.evicted
	case done && allZero && initDone:
		s.Phase = corev1.PodSucceeded
	case done || (allExited && !allZero):
		s.Phase = corev1.PodFailed
		switch state {
		case stateOOM:
			s.Reason, s.Message = "OOMKilled", "the Slurm job ran out of memory"
		case stateCancelled, statePreempted:
			s.Reason, s.Message = "Slurm"+strings.ToUpper(state[:1])+strings.ToLower(state[1:]), "the Slurm job was "+strings.ToLower(state)
		}
	case allExited:
		s.Phase = corev1.PodSucceeded
	case held:
		s.Reason, s.Message = ReasonJobHeld, heldMessage(v.job)
	case state == stateRunning && initDone && anyStarted:
		// Running, as on a kubelet, once a container is: exec and
		// attach then find it.
		s.Phase = corev1.PodRunning
	}
	return s
}
