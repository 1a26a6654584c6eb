package logging

import (
	"errors"
	"fmt"
	stdlog "log"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/sirupsen/logrus"
	"k8s.io/klog/v2"

	"github.com/vkubelet/virtual-kubelet/internal/testing/childproc"
)

// reset puts the logging back as a test found it.
func reset(t *testing.T) {
	flush, err := Configure("info", nil)
	if err != nil {
		t.Fatal(err)
	}
	flush()
	stdlog.SetOutput(os.Stderr)
}

// configured logs at level to the buffer it returns, until the test ends.
func configured(t *testing.T, level string) (buf *childproc.Output, flush func()) {
	t.Helper()
	buf = &childproc.Output{}
	flush, err := Configure(level, buf)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { reset(t) })
	return buf, flush
}

func TestKlogGoesThroughLogrus(t *testing.T) {
	buf, flush := configured(t, "debug")
	klog.InfoS("reflector started", "resource", "pods")
	klog.V(3).InfoS("verbose detail")
	klog.V(6).InfoS("too verbose")
	klog.ErrorS(errors.New("boom"), "watch failed")
	klog.Flush()
	flush()
	out := buf.String()
	for _, want := range []string{`level=info msg="reflector started" resource=pods`, `level=debug msg="verbose detail"`, `level=error msg="watch failed" error=boom`} {
		if !strings.Contains(out, want) {
			t.Errorf("missing %q in:\n%s", want, out)
		}
	}
	if strings.Contains(out, "too verbose") {
		t.Error("V(6) must be trace, below debug")
	}
	if logrus.GetLevel() != logrus.DebugLevel {
		t.Error("level not set")
	}
}

func TestBadLevel(t *testing.T) {
	_, err := Configure("loud", nil)
	if err == nil || !strings.Contains(err.Error(), `--log-level: "loud"`) {
		t.Errorf("err = %v", err)
	}
}

// stuckOutput blocks every write until released, as a full pipe or disk.
type stuckOutput struct {
	release chan struct{}
	childproc.Output
}

func (o *stuckOutput) Write(p []byte) (int, error) {
	<-o.release
	return o.Output.Write(p)
}

func TestLinesAreDroppedNotWaitedFor(t *testing.T) {
	out := &stuckOutput{release: make(chan struct{})}
	q := newLineQueue(out, 4)
	before := Dropped()
	// The queue's goroutine takes one line and waits on the output with
	// it; four more fill the queue; the rest must come back at once.
	done := make(chan struct{})
	go func() {
		defer close(done)
		for i := range 10 {
			if n, err := fmt.Fprintf(q, "line %d\n", i); n != len(fmt.Sprintf("line %d\n", i)) || err != nil {
				t.Errorf("Write = %d, %v", n, err)
			}
		}
	}()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("a log write waited for the output")
	}
	if d := Dropped() - before; d < 5 || d > 6 {
		t.Errorf("%d lines dropped, want 5 or 6 (10 lines, 4 queued, 0 or 1 being written)", d)
	}
	close(out.release)
	q.flush()
	got := out.String()
	if !strings.Contains(got, "line 0\n") || !strings.Contains(got, "lines dropped") {
		t.Errorf("output:\n%s\nwant the first line and the count of those dropped", got)
	}
	if strings.Count(got, "line ") < 4 {
		t.Errorf("output:\n%s\nwant the queued lines", got)
	}
	// After flush, a line is written as it comes.
	fmt.Fprintln(q, "after flush")
	if !strings.HasSuffix(out.String(), "after flush\n") {
		t.Errorf("a line after flush was not written: %q", out.String())
	}
	q.flush() // twice is fine
}

// A queue that keeps up holds no lines and no room for them: its bound
// is for a storm, not a cost of every process.
func TestQueueHoldsNothingOnceWritten(t *testing.T) {
	out := &childproc.Output{}
	q := newLineQueue(out, queuedLines)
	defer q.flush()
	for i := range 100 {
		fmt.Fprintf(q, "line %d\n", i)
	}
	deadline := time.Now().Add(10 * time.Second)
	for strings.Count(out.String(), "line ") < 100 {
		if time.Now().After(deadline) {
			t.Fatalf("the lines were not written out: %q", out.String())
		}
		time.Sleep(time.Millisecond)
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.pending.Cap() != 0 {
		t.Errorf("the written queue keeps %d lines and room for %d", q.pending.Len(), q.pending.Cap())
	}
}

func TestStdlibLoggerGoesThroughLogrus(t *testing.T) {
	buf, flush := configured(t, "info")
	stdlog.Printf("http: panic serving 10.0.0.1:1234: boom")
	stdlog.Printf("http: TLS handshake error from 10.0.0.1:1234: EOF")
	flush()
	out := buf.String()
	if !strings.Contains(out, `level=info msg="http: panic serving 10.0.0.1:1234: boom" logger=stdlib`) {
		t.Errorf("missing the server error at info in:\n%s", out)
	}
	if strings.Contains(out, "TLS handshake error") {
		t.Errorf("a TLS handshake error is logged at info:\n%s", out)
	}
}
