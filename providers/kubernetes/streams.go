package kubernetes

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

// GetContainerLogs streams the log of the container of B's pod.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	remote, err := p.remoteFor(namespace, podName)
	if err != nil {
		return nil, err
	}
	lo := &corev1.PodLogOptions{
		Container:  containerName,
		Follow:     opts.Follow,
		Previous:   opts.Previous,
		Timestamps: opts.Timestamps,
	}
	if opts.Tail >= 0 {
		lo.TailLines = ptr.To(int64(opts.Tail))
	}
	if opts.LimitBytes > 0 {
		lo.LimitBytes = ptr.To(int64(opts.LimitBytes))
	}
	if opts.SinceSeconds > 0 {
		lo.SinceSeconds = ptr.To(int64(opts.SinceSeconds))
	}
	if !opts.SinceTime.IsZero() {
		lo.SinceTime = &metav1.Time{Time: opts.SinceTime}
	}
	return p.remote.CoreV1().Pods(remote.Namespace).GetLogs(remote.Name, lo).Stream(ctx)
}

// RunInContainer runs cmd in the container of B's pod through B's API
// server; a non-zero exit comes back as client-go's exec.CodeExitError,
// which the kubelet API reports as the exit code.
func (p *Provider) RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error {
	return p.stream(ctx, namespace, podName, "exec", &corev1.PodExecOptions{
		Container: containerName, Command: cmd,
		Stdin: attach.Stdin() != nil, Stdout: attach.Stdout() != nil, Stderr: attach.Stderr() != nil, TTY: attach.TTY(),
	}, attach)
}

// AttachToContainer attaches to the container of B's pod.
func (p *Provider) AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error {
	return p.stream(ctx, namespace, podName, "attach", &corev1.PodAttachOptions{
		Container: containerName,
		Stdin:     attach.Stdin() != nil, Stdout: attach.Stdout() != nil, Stderr: attach.Stderr() != nil, TTY: attach.TTY(),
	}, attach)
}

// stream runs an exec or attach session against B's API server over SPDY.
// Its setup is bounded by the config's remote.upgradeTimeout; a session B
// ends without a status is an error, not a success (remoteSession).
func (p *Provider) stream(ctx context.Context, namespace, podName, subresource string, opts runtime.Object, attach api.AttachIO) error {
	remote, err := p.remoteFor(namespace, podName)
	if err != nil {
		return err
	}
	url := p.remote.CoreV1().RESTClient().Post().Resource("pods").Namespace(remote.Namespace).Name(remote.Name).
		SubResource(subresource).VersionedParams(opts, scheme.ParameterCodec).URL()
	transport, session, err := newRemoteSession(ctx, p.remoteConfig, url, p.cfg.upgradeTimeout())
	if err != nil {
		return err
	}
	defer session.release()
	executor, err := remotecommand.NewSPDYExecutorForTransports(transport, session, http.MethodPost, url)
	if err != nil {
		return err
	}
	so := remotecommand.StreamOptions{Tty: attach.TTY()}
	if in := attach.Stdin(); in != nil {
		so.Stdin = in
	}
	if out := attach.Stdout(); out != nil {
		so.Stdout = out
	}
	if errOut := attach.Stderr(); errOut != nil {
		so.Stderr = errOut
	}
	if resize := attach.Resize(); resize != nil {
		so.TerminalSizeQueue = sizeQueue(resize)
	}
	return session.ended(executor.StreamWithContext(ctx, so))
}

// sizeQueue hands terminal resizes to the executor; nil ends the queue.
type sizeQueue <-chan api.TermSize

func (q sizeQueue) Next() *remotecommand.TerminalSize {
	size, ok := <-q
	if !ok {
		return nil
	}
	return &remotecommand.TerminalSize{Width: size.Width, Height: size.Height}
}

// PortForward connects stream to port of B's pod: one SPDY connection to
// B's pods/portforward with the error and data stream pair of the protocol.
func (p *Provider) PortForward(ctx context.Context, namespace, podName string, port int32, stream io.ReadWriteCloser) error {
	remote, err := p.remoteFor(namespace, podName)
	if err != nil {
		return err
	}
	url := p.remote.CoreV1().RESTClient().Post().Resource("pods").Namespace(remote.Namespace).Name(remote.Name).SubResource("portforward").URL()
	transport, session, err := newRemoteSession(ctx, p.remoteConfig, url, p.cfg.upgradeTimeout())
	if err != nil {
		return err
	}
	defer session.release()
	conn, _, err := spdy.NewDialer(session, &http.Client{Transport: transport}, http.MethodPost, url).Dial(portforward.PortForwardProtocolV1Name)
	if err != nil {
		return fmt.Errorf("port-forward to %s/%s in the remote cluster: %w", remote.Namespace, remote.Name, session.setupError(err))
	}
	defer conn.Close()
	stop := context.AfterFunc(ctx, func() { conn.Close() })
	defer stop()

	headers := http.Header{}
	headers.Set(corev1.StreamType, corev1.StreamTypeError)
	headers.Set(corev1.PortHeader, strconv.Itoa(int(port)))
	headers.Set(corev1.PortForwardRequestIDHeader, "0")
	errStream, err := conn.CreateStream(headers)
	if err != nil {
		return err
	}
	_ = errStream.Close() // only read
	remoteErr := make(chan error, 1)
	go func() {
		msg, err := io.ReadAll(errStream)
		switch {
		case err != nil:
			remoteErr <- err
		case len(msg) > 0:
			remoteErr <- fmt.Errorf("port-forward to port %d: %s", port, msg)
		default:
			remoteErr <- nil
		}
	}()
	headers.Set(corev1.StreamType, corev1.StreamTypeData)
	data, err := conn.CreateStream(headers)
	if err != nil {
		return err
	}
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		_, _ = io.Copy(data, stream)
		_ = data.Close() // half-close: the pod sees EOF
	}()
	_, copyErr := io.Copy(stream, data)
	_ = stream.Close()
	conn.Close()
	wg.Wait()
	if err := <-remoteErr; err != nil {
		return err
	}
	if copyErr != nil && ctx.Err() == nil {
		return copyErr
	}
	return nil
}
