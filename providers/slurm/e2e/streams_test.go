//go:build e2e

package e2e_test

import (
	"context"
	"net/http"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/slurmtest"
)

// TestSlurmAttachAndLogOptions drives attach and the log options through
// the API server. Attach: a stdinOnce container reads what the client
// sends, answers on stdout and stderr (kept apart), sees end of file once
// the client's input ends and exits, which ends the session (a later
// attach is refused: the container is not running); a container
// with a plain stdin keeps it open across two attaches; one with tty: true
// is on a terminal, its arguments still literal. Logs: --timestamps
// prefixes each line with its RFC 3339 time, --since-time and --since
// filter by it, --tail and --limit-bytes still apply.
func TestSlurmAttachAndLogOptions(t *testing.T) {
	n, _, ns := slurmtest.RunningNode(t)
	c := n.C

	once := slurmtest.Shell("main", `echo ready; while read -r l; do echo "got:$l"; echo "err:$l" >&2; done; echo closed`)
	once.Stdin, once.StdinOnce = true, true
	n.Create(t, n.Pod(ns, "once", once))
	repl := slurmtest.Shell("main", `echo ready; while read -r l; do echo "got:$l"; done; echo closed`)
	repl.Stdin = true
	n.Create(t, n.Pod(ns, "repl", repl))
	attack := "$(touch /tmp/vk-slurm-tty-pwned);`touch /tmp/vk-slurm-tty-pwned`"
	term := slurmtest.Shell("main", `test -t 0 && test -t 1 && echo on-a-tty; read -r l; echo "got:$l"; echo "$1"`, attack)
	term.Stdin, term.StdinOnce, term.TTY = true, true, true
	n.Create(t, n.Pod(ns, "term", term))
	n.Create(t, n.Pod(ns, "stamped", slurmtest.Shell("main", "echo first; sleep 1.2; echo second; while :; do sleep 1; done")))
	for _, name := range []string{"once", "repl", "term", "stamped"} {
		n.WaitPod(t, ns, name, "Running", daemontest.Running)
	}
	// Attach streams from the end of the log: wait until the loop reads.
	for _, name := range []string{"once", "repl"} {
		slurmtest.Eventually(t, name+" ready", func() (bool, string) {
			out, _ := c.Kubectl(context.Background(), "-n", ns, "logs", name)
			return out == "ready\n", out
		})
	}

	// The session ends by itself: the container exits once its stdin is
	// closed.
	var stdout, stderr childproc.Output
	ctx, cancel := context.WithTimeout(context.Background(), slurmtest.Timeout)
	defer cancel()
	if err := attach(ctx, n, ns, "once", remotecommand.StreamOptions{
		Stdin: strings.NewReader("hello\nworld\n"), Stdout: &stdout, Stderr: &stderr,
	}); err != nil {
		t.Fatalf("attach once: %v (stdout %q, stderr %q)", err, stdout.String(), stderr.String())
	}
	if got, want := stdout.String(), "got:hello\ngot:world\nclosed\n"; got != want {
		t.Errorf("attach once: stdout %q, want %q", got, want)
	}
	if got, want := stderr.String(), "err:hello\nerr:world\n"; got != want {
		t.Errorf("attach once: stderr %q, want %q", got, want)
	}
	n.WaitPod(t, ns, "once", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if err := attach(ctx, n, ns, "once", remotecommand.StreamOptions{Stdout: &stdout}); err == nil || !strings.Contains(err.Error(), "not running") {
		t.Errorf("attach to the exited container: %v, want an error saying it is not running", err)
	}

	// Without stdinOnce the end of one client's input does not close the
	// container's: a second attach is read too.
	for _, word := range []string{"one", "two"} {
		out := &awaitBuffer{want: "got:" + word + "\n", found: make(chan struct{})}
		ctx, cancel := context.WithTimeout(context.Background(), slurmtest.Timeout)
		errc := make(chan error, 1)
		go func() {
			errc <- attach(ctx, n, ns, "repl", remotecommand.StreamOptions{Stdin: strings.NewReader(word + "\n"), Stdout: out})
		}()
		select {
		case <-out.found:
			cancel()
			_ = <-errc // ended by the cancel above
		case err := <-errc:
			cancel()
			t.Fatalf("attach repl (%s) ended (%v) before its answer; got %q", word, err, out.String())
		}
	}
	if out := n.Kubectl(t, "-n", ns, "logs", "repl"); out != "ready\ngot:one\ngot:two\n" {
		t.Errorf("repl log %q: the container's stdin closed between attaches", out)
	}

	// A container with tty: true is on a terminal, which echoes the input
	// and ends lines with CRLF; its command line stayed literal.
	slurmtest.Eventually(t, "term on a tty", func() (bool, string) {
		out, _ := c.Kubectl(context.Background(), "-n", ns, "logs", "term")
		return strings.Contains(out, "on-a-tty\r\n"), out
	})
	var tty childproc.Output
	if err := attach(ctx, n, ns, "term", remotecommand.StreamOptions{Stdin: strings.NewReader("hi\n"), Stdout: &tty, Tty: true}); err != nil {
		t.Fatalf("attach -t term: %v (stdout %q)", err, tty.String())
	}
	if got, want := tty.String(), "hi\r\ngot:hi\r\n"+attack+"\r\n"; got != want {
		t.Errorf("attach -t term: %q, want %q", got, want)
	}
	if _, err := os.Stat("/tmp/vk-slurm-tty-pwned"); err == nil {
		t.Error("an argument of the tty container ran as shell: /tmp/vk-slurm-tty-pwned exists")
	}

	slurmtest.Eventually(t, "both lines of the stamped pod", func() (bool, string) {
		out, _ := c.Kubectl(context.Background(), "-n", ns, "logs", "stamped")
		return out == "first\nsecond\n", out
	})
	stamped := n.Kubectl(t, "-n", ns, "logs", "stamped", "--timestamps")
	lines := strings.Split(strings.TrimSuffix(stamped, "\n"), "\n")
	var stamps []time.Time
	for i, want := range []string{"first", "second"} {
		ts, text, ok := strings.Cut(lines[min(i, len(lines)-1)], " ")
		at, err := time.Parse(time.RFC3339Nano, ts)
		if len(lines) != 2 || !ok || err != nil || text != want {
			t.Fatalf("logs --timestamps: %q, want \"TIME first\\nTIME second\\n\" (%v)", stamped, err)
		}
		stamps = append(stamps, at)
	}
	if d := stamps[1].Sub(stamps[0]); d < time.Second {
		t.Errorf("logs --timestamps: the lines are %s apart, the container slept 1.2 s between them", d)
	}
	// kubectl sends --since-time in whole seconds: the second after the
	// first line's is still at or before the second line's.
	since := stamps[0].Truncate(time.Second).Add(time.Second).Format(time.RFC3339)
	if out := n.Kubectl(t, "-n", ns, "logs", "stamped", "--since-time="+since); out != "second\n" {
		t.Errorf("logs --since-time=%s: %q, want the second line only", since, out)
	}
	if out := n.Kubectl(t, "-n", ns, "logs", "stamped", "--since=1h"); out != "first\nsecond\n" {
		t.Errorf("logs --since=1h: %q", out)
	}
	if out := n.Kubectl(t, "-n", ns, "logs", "stamped", "--tail=1", "--timestamps"); out != lines[1]+"\n" {
		t.Errorf("logs --tail=1 --timestamps: %q, want %q", out, lines[1]+"\n")
	}
	if out := n.Kubectl(t, "-n", ns, "logs", "stamped", "--timestamps", "--limit-bytes=10"); out != stamped[:10] {
		t.Errorf("logs --timestamps --limit-bytes=10: %q, want %q", out, stamped[:10])
	}
}

// attach runs one attach session to the pod's container main through the
// API server (WebSocket, falling back to SPDY) until it ends or ctx does.
func attach(ctx context.Context, n *slurmtest.Node, ns, pod string, opts remotecommand.StreamOptions) error {
	req := n.C.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ns).Name(pod).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: "main", Stdin: opts.Stdin != nil, Stdout: opts.Stdout != nil, Stderr: opts.Stderr != nil}, scheme.ParameterCodec)
	ws, err := remotecommand.NewWebSocketExecutor(n.C.Config, http.MethodGet, req.URL().String())
	if err != nil {
		return err
	}
	spdy, err := remotecommand.NewSPDYExecutor(n.C.Config, http.MethodPost, req.URL())
	if err != nil {
		return err
	}
	exec, err := remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
	if err != nil {
		return err
	}
	return exec.StreamWithContext(ctx, opts)
}

// awaitBuffer collects a session's output and closes found once it holds
// want.
type awaitBuffer struct {
	childproc.Output
	want  string
	found chan struct{}
	once  sync.Once
}

func (a *awaitBuffer) Write(p []byte) (int, error) {
	n, err := a.Output.Write(p)
	if strings.Contains(a.String(), a.want) {
		a.once.Do(func() { close(a.found) })
	}
	return n, err
}
