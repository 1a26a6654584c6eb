package mock

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// A container's log is deterministic: while it runs it writes line n at
// start + n*interval, reading
//
//	<namespace>/<pod>/<container> line <n>
//
// so tests and demos know exactly what to expect, and following a log shows
// new lines appear in real time.

// logLine is one line of the log of an instance.
type logLine struct {
	at   time.Time
	text string
}

// logSource is a snapshot of what is needed to produce an instance's log.
type logSource struct {
	prefix   string
	interval time.Duration
	start    time.Time
	end      time.Time // zero while running
	// running reports, under the provider's lock, whether the instance is
	// still the running one (for follow).
	running func() bool
}

func (s logSource) line(n int) logLine {
	return logLine{at: s.start.Add(time.Duration(n) * s.interval), text: fmt.Sprintf("%s line %d", s.prefix, n)}
}

// count is the number of lines written by t.
func (s logSource) count(t time.Time) int {
	if !s.end.IsZero() && t.After(s.end) {
		t = s.end
	}
	if t.Before(s.start) {
		return 0
	}
	return int(t.Sub(s.start) / s.interval)
}

// first is the first line to return under opts, 1-based.
func (s logSource) first(opts api.ContainerLogOpts, written int, now time.Time) int {
	first := 1
	since := opts.Since(now)
	if !since.IsZero() && since.After(s.start) {
		// The first line at or after since.
		first = int((since.Sub(s.start) + s.interval - 1) / s.interval)
	}
	if opts.Tail >= 0 && written-opts.Tail+1 > first {
		first = written - opts.Tail + 1
	}
	return max(first, 1)
}

func (l logLine) format(timestamps bool) string {
	if timestamps {
		return l.at.UTC().Format(time.RFC3339Nano) + " " + l.text + "\n"
	}
	return l.text + "\n"
}

// GetContainerLogs returns the container's log as opts ask. Lines are
// made as they are read: a log of a year of lines costs no more memory
// than one of ten, and tailLines and sinceTime pick the first line by
// arithmetic.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	src, err := p.logSource(namespace, podName, containerName, opts.Previous)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	written := src.count(now)
	head := &lineReader{src: src, next: src.first(opts, written, now), last: written, timestamps: opts.Timestamps}
	var rc io.ReadCloser = io.NopCloser(head)
	if opts.Follow && !opts.Previous && src.end.IsZero() {
		pr, pw := io.Pipe()
		go src.follow(ctx, pw, head)
		rc = pr
	}
	if opts.LimitBytes > 0 {
		rc = limitedReadCloser{io.LimitReader(rc, int64(opts.LimitBytes)), rc}
	}
	return rc, nil
}

// limitedReadCloser reads at most a limit of a ReadCloser, and closes it.
type limitedReadCloser struct {
	io.Reader
	io.Closer
}

// lineReader reads lines next to last of an instance's log, each made when
// it is reached.
type lineReader struct {
	src        logSource
	next, last int
	timestamps bool
	// pending is what the last Read left of the current line.
	pending string
}

func (r *lineReader) Read(b []byte) (int, error) {
	n := 0
	for n < len(b) {
		if r.pending == "" {
			if r.next > r.last {
				break
			}
			r.pending = r.src.line(r.next).format(r.timestamps)
			r.next++
		}
		c := copy(b[n:], r.pending)
		r.pending, n = r.pending[c:], n+c
	}
	if n == 0 && len(b) > 0 {
		return 0, io.EOF
	}
	return n, nil
}

// follow writes what head has, then each new line as it is written, until
// the reader goes away, ctx ends or the instance stops.
func (s logSource) follow(ctx context.Context, w *io.PipeWriter, head *lineReader) {
	if _, err := io.Copy(w, head); err != nil {
		return
	}
	for next := head.next; ; next++ {
		l := s.line(next)
		select {
		case <-ctx.Done():
			_ = w.CloseWithError(ctx.Err())
			return
		case <-time.After(time.Until(l.at)):
		}
		if !s.running() {
			_ = w.Close()
			return
		}
		if _, err := io.WriteString(w, l.format(head.timestamps)); err != nil {
			return
		}
	}
}

func (p *Provider) logSource(namespace, podName, containerName string, previous bool) (logSource, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, c, err := p.lookup(namespace, podName, containerName)
	if err != nil {
		return logSource{}, err
	}
	n, run := len(c.instances), c.runs
	if previous {
		n--
	}
	if n < 1 {
		if previous {
			return logSource{}, errdefs.InvalidInputf("previous terminated container %q in pod %q not found", containerName, podName)
		}
		return logSource{}, errdefs.InvalidInputf("container %q in pod %q is waiting to start", containerName, podName)
	}
	inst := c.instances[n-1]
	src := logSource{
		prefix:   fmt.Sprintf("%s/%s/%s", namespace, podName, containerName),
		interval: c.script.logInterval,
		start:    inst.start,
		end:      inst.end,
	}
	src.running = func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return !ps.deleted && c.runs == run && c.instances[len(c.instances)-1].end.IsZero()
	}
	return src, nil
}
