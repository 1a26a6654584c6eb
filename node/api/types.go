package api

import (
	"context"
	"io"
	"time"

	corev1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
)

// ContainerLogOpts are the options of a container log request, parsed and
// validated from the kubelet API's query parameters.
type ContainerLogOpts struct {
	// Tail is the number of lines to return from the end of the log;
	// negative means all of it.
	Tail int
	// LimitBytes caps the bytes returned; 0 means no limit. The handler
	// enforces it as well, so a provider may ignore it.
	LimitBytes int
	// Timestamps prefixes each line with its RFC3339Nano time and a space.
	Timestamps bool
	// Follow streams new lines until the request ends.
	Follow bool
	// Previous asks for the log of the previous instance of the container.
	Previous bool
	// SinceSeconds returns only lines newer than this many seconds; 0
	// means not set.
	SinceSeconds int
	// SinceTime returns only lines at or after this time; zero means not
	// set. At most one of SinceSeconds and SinceTime is set.
	SinceTime time.Time
}

// Since is the time from which lines are returned at now: SinceTime, or
// SinceSeconds before now; zero when neither is set.
func (o ContainerLogOpts) Since(now time.Time) time.Time {
	if o.SinceSeconds > 0 {
		return now.Add(-time.Duration(o.SinceSeconds) * time.Second)
	}
	return o.SinceTime
}

// TermSize is the size of a terminal, in characters.
type TermSize struct {
	Width  uint16
	Height uint16
}

// AttachIO is what an exec or attach session connects to the container.
type AttachIO interface {
	// Stdin is nil unless the client sends input.
	Stdin() io.Reader
	// Stdout is nil unless the client asked for it.
	Stdout() io.WriteCloser
	// Stderr is nil unless the client asked for it; always nil with a TTY,
	// where everything goes to Stdout.
	Stderr() io.WriteCloser
	// TTY reports whether the client asked for a terminal.
	TTY() bool
	// Resize delivers terminal size changes; nil without a TTY.
	Resize() <-chan TermSize
}

// ContainerExecHandlerFunc runs cmd in a container. To report a command's
// non-zero exit code, return an error implementing k8s.io/utils/exec.ExitError
// (for example exec.CodeExitError).
type ContainerExecHandlerFunc func(ctx context.Context, namespace, podName, containerName string, cmd []string, attach AttachIO) error

// ContainerAttachHandlerFunc attaches to a container's main process.
type ContainerAttachHandlerFunc func(ctx context.Context, namespace, podName, containerName string, attach AttachIO) error

// ContainerLogsHandlerFunc returns a container's log.
type ContainerLogsHandlerFunc func(ctx context.Context, namespace, podName, containerName string, opts ContainerLogOpts) (io.ReadCloser, error)

// PortForwardHandlerFunc connects stream to port of the pod. It returns when
// the stream is done.
type PortForwardHandlerFunc func(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error

// PodListerFunc lists the pods running on the node.
type PodListerFunc func(context.Context) ([]*corev1.Pod, error)

// PodGetterFunc returns one pod running on the node; an error of kind
// errdefs.NotFound says the node has no such pod.
type PodGetterFunc func(ctx context.Context, namespace, name string) (*corev1.Pod, error)

// PodStatsSummaryHandlerFunc returns the node's stats summary, as the
// kubelet's /stats/summary serves it.
type PodStatsSummaryHandlerFunc func(context.Context) (*statsv1alpha1.Summary, error)
