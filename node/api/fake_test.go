package api_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	utilexec "k8s.io/utils/exec"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// logStart is the time of the fake containers' first log line; line i is
// written i seconds later.
var logStart = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

// fakeProvider is an in-test provider: a set of pods, each container with a
// log of logLines lines, a few exec commands, an echo on port 80.
type fakeProvider struct {
	logLines int

	mu   sync.Mutex
	pods map[string]*corev1.Pod
	// followDone is closed (once) when a following log request ends.
	followDone chan struct{}
	followOnce sync.Once
	// summaryErr makes GetStatsSummary fail.
	summaryErr error
	// waitEnded receives when the command "wait" ends.
	waitEnded chan struct{}
	// podLists and podGets count the calls of GetPods and GetPod.
	podLists, podGets int
}

func newFakeProvider() *fakeProvider {
	return &fakeProvider{logLines: 10, pods: map[string]*corev1.Pod{}, followDone: make(chan struct{}), waitEnded: make(chan struct{}, 10)}
}

func (f *fakeProvider) addPod(p *corev1.Pod) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.pods[p.Namespace+"/"+p.Name] = p.DeepCopy()
}

func fakePod(ns, name string, containers ...string) *corev1.Pod {
	p := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: types.UID("uid-" + name)}}
	for _, c := range containers {
		p.Spec.Containers = append(p.Spec.Containers, corev1.Container{Name: c, Image: "busybox"})
	}
	return p
}

func (f *fakeProvider) config() api.PodHandlerConfig {
	return api.PodHandlerConfig{
		RunInContainer:    f.RunInContainer,
		AttachToContainer: f.AttachToContainer,
		GetContainerLogs:  f.GetContainerLogs,
		GetPods:           f.GetPods,
		GetPod:            f.GetPod,
		// Also serves /metrics/resource, which has no function of its own.
		GetStatsSummary: f.GetStatsSummary,
		PortForward:     f.PortForward,
	}
}

func (f *fakeProvider) lookup(ns, name, container string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	p, ok := f.pods[ns+"/"+name]
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not known to the provider", ns, name)
	}
	if container == "" {
		return nil
	}
	for _, c := range p.Spec.Containers {
		if c.Name == container {
			return nil
		}
	}
	return errdefs.NotFoundf("container %q is not known in pod %s/%s", container, ns, name)
}

func (f *fakeProvider) GetPods(context.Context) ([]*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.podLists++
	var out []*corev1.Pod
	for _, p := range f.pods {
		out = append(out, p.DeepCopy())
	}
	return out, nil
}

func (f *fakeProvider) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.podGets++
	p, ok := f.pods[ns+"/"+name]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not known to the provider", ns, name)
	}
	return p.DeepCopy(), nil
}

// logLine is line i of a container's log.
func logLine(container string, i int, timestamps bool) string {
	l := fmt.Sprintf("%s line %d\n", container, i)
	if timestamps {
		l = logStart.Add(time.Duration(i)*time.Second).Format(time.RFC3339Nano) + " " + l
	}
	return l
}

// GetContainerLogs honours Tail and Timestamps but not LimitBytes, which
// the handler must enforce. With Follow, it then writes a line every 20ms
// until ctx ends.
func (f *fakeProvider) GetContainerLogs(ctx context.Context, ns, pod, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	if err := f.lookup(ns, pod, container); err != nil {
		return nil, err
	}
	first := 1
	if opts.Tail >= 0 {
		first = f.logLines - opts.Tail + 1
	}
	var b strings.Builder
	for i := max(first, 1); i <= f.logLines; i++ {
		b.WriteString(logLine(container, i, opts.Timestamps))
	}
	if !opts.Follow {
		return io.NopCloser(strings.NewReader(b.String())), nil
	}
	pr, pw := io.Pipe()
	go func() {
		defer f.followOnce.Do(func() { close(f.followDone) })
		if _, err := io.WriteString(pw, b.String()); err != nil {
			return
		}
		for i := f.logLines + 1; ; i++ {
			select {
			case <-ctx.Done():
				_ = pw.CloseWithError(ctx.Err())
				return
			case <-time.After(20 * time.Millisecond):
			}
			if _, err := io.WriteString(pw, logLine(container, i, opts.Timestamps)); err != nil {
				return
			}
		}
	}()
	return pr, nil
}

// RunInContainer knows:
//
//	echo ARGS...   print ARGS
//	cat            copy stdin to stdout
//	warn ARGS...   print ARGS to stderr
//	exit N         exit with N
//	wrapexit N     exit with N, the exit error wrapped in another
//	sizes N        print the first N terminal sizes, as WxH lines
//	wait           wait until the session ends, then print nothing
func (f *fakeProvider) RunInContainer(ctx context.Context, ns, pod, container string, cmd []string, a api.AttachIO) error {
	if err := f.lookup(ns, pod, container); err != nil {
		return err
	}
	defer closeOutputs(a)
	out := a.Stdout()
	if out == nil {
		out = nopWriteCloser{io.Discard}
	}
	switch cmd[0] {
	case "echo":
		_, err := fmt.Fprintln(out, strings.Join(cmd[1:], " "))
		return err
	case "cat":
		if a.Stdin() == nil {
			return errors.New("cat: no stdin")
		}
		_, err := io.Copy(out, a.Stdin())
		return err
	case "warn":
		if a.Stderr() == nil {
			return errors.New("warn: no stderr")
		}
		_, err := fmt.Fprintln(a.Stderr(), strings.Join(cmd[1:], " "))
		return err
	case "exit":
		code, err := strconv.Atoi(cmd[1])
		if err != nil {
			return err
		}
		return utilexec.CodeExitError{Err: fmt.Errorf("exit %d", code), Code: code}
	case "wrapexit":
		code, err := strconv.Atoi(cmd[1])
		if err != nil {
			return err
		}
		return fmt.Errorf("running %v: %w", cmd, utilexec.CodeExitError{Err: fmt.Errorf("exit %d", code), Code: code})
	case "sizes":
		n, _ := strconv.Atoi(cmd[1])
		if a.Resize() == nil {
			return errors.New("sizes: no terminal")
		}
		for i := 0; i < n; i++ {
			select {
			case s, ok := <-a.Resize():
				if !ok {
					return errors.New("sizes: resize channel closed")
				}
				fmt.Fprintf(out, "%dx%d\n", s.Width, s.Height)
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	case "wait":
		<-ctx.Done()
		f.waitEnded <- struct{}{}
		return nil
	}
	return utilexec.CodeExitError{Err: fmt.Errorf("%s: command not found", cmd[0]), Code: 127}
}

// AttachToContainer greets, then echoes stdin lines prefixed by "attached: ".
func (f *fakeProvider) AttachToContainer(ctx context.Context, ns, pod, container string, a api.AttachIO) error {
	if err := f.lookup(ns, pod, container); err != nil {
		return err
	}
	defer closeOutputs(a)
	if a.Stdout() == nil {
		return errors.New("attach: no stdout")
	}
	fmt.Fprintln(a.Stdout(), "hello from", container)
	if a.Stdin() == nil {
		return nil
	}
	s := bufio.NewScanner(a.Stdin())
	for s.Scan() {
		fmt.Fprintln(a.Stdout(), "attached:", s.Text())
	}
	return nil
}

// PortForward echoes on port 80 and refuses others.
func (f *fakeProvider) PortForward(ctx context.Context, ns, pod string, port int32, stream io.ReadWriteCloser) error {
	if err := f.lookup(ns, pod, ""); err != nil {
		return err
	}
	defer stream.Close()
	if port != 80 {
		return fmt.Errorf("nothing listens on port %d", port)
	}
	_, err := io.Copy(stream, stream)
	return err
}

// Sample figures of the fake summary.
var (
	sampleTime = metav1.NewTime(time.Date(2026, 5, 6, 7, 8, 9, 0, time.UTC))
	startTime  = metav1.NewTime(time.Date(2026, 5, 6, 7, 0, 0, 500_000_000, time.UTC))
)

func (f *fakeProvider) GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.summaryErr != nil {
		return nil, f.summaryErr
	}
	s := &statsv1alpha1.Summary{Node: statsv1alpha1.NodeStats{
		NodeName:  "fake",
		StartTime: startTime,
		CPU:       &statsv1alpha1.CPUStats{Time: sampleTime, UsageCoreNanoSeconds: ptr.To[uint64](12_500_000_000), UsageNanoCores: ptr.To[uint64](1000)},
		Memory:    &statsv1alpha1.MemoryStats{Time: sampleTime, WorkingSetBytes: ptr.To[uint64](1 << 30), UsageBytes: ptr.To[uint64](2 << 30)},
		Fs:        &statsv1alpha1.FsStats{Time: sampleTime, UsedBytes: ptr.To[uint64](42)},
	}}
	keys := make([]string, 0, len(f.pods))
	for k := range f.pods {
		keys = append(keys, k)
	}
	for _, k := range keys {
		p := f.pods[k]
		ps := statsv1alpha1.PodStats{
			PodRef:    statsv1alpha1.PodReference{Name: p.Name, Namespace: p.Namespace, UID: string(p.UID)},
			StartTime: startTime,
			CPU:       &statsv1alpha1.CPUStats{Time: sampleTime, UsageCoreNanoSeconds: ptr.To[uint64](3_000_000_000)},
			Memory:    &statsv1alpha1.MemoryStats{Time: sampleTime, WorkingSetBytes: ptr.To[uint64](3 << 20)},
		}
		for i, c := range p.Spec.Containers {
			ps.Containers = append(ps.Containers, statsv1alpha1.ContainerStats{
				Name:      c.Name,
				StartTime: startTime,
				CPU:       &statsv1alpha1.CPUStats{Time: sampleTime, UsageCoreNanoSeconds: ptr.To[uint64](uint64(i+1) * 1_000_000_000)},
				Memory:    &statsv1alpha1.MemoryStats{Time: sampleTime, WorkingSetBytes: ptr.To[uint64](uint64(i+1) << 20)},
				Rootfs:    &statsv1alpha1.FsStats{Time: sampleTime, UsedBytes: ptr.To[uint64](7)},
			})
		}
		s.Pods = append(s.Pods, ps)
	}
	return s, nil
}

func closeOutputs(a api.AttachIO) {
	if w := a.Stdout(); w != nil {
		_ = w.Close()
	}
	if w := a.Stderr(); w != nil {
		_ = w.Close()
	}
}

type nopWriteCloser struct{ io.Writer }

func (nopWriteCloser) Close() error { return nil }
