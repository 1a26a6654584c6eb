package slurm

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

// A container's log file, c/NAME/log, holds records, one a line, as
// the job's launcher writes them (package sandbox): "TIME STREAM TAG TEXT", the kubelet's CRI
// log format. TIME is when the text was read (RFC 3339, UTC), STREAM stdout
// or stderr, TAG F when TEXT ends a line and P when it is part of one.

// followPoll is how often a followed log is read again at its end.
const followPoll = 200 * time.Millisecond

// logRecord is one record of a log file.
type logRecord struct {
	time   time.Time // zero for a line that is not a record
	stderr bool
	text   []byte // with its newline when it ends a line
}

// parseRecord reads one line of a log file. A line that is not a record
// (from a log written before records were) is stdout text as it is.
func parseRecord(line []byte) logRecord {
	ts, rest, ok1 := bytes.Cut(line, []byte(" "))
	stream, rest, ok2 := bytes.Cut(rest, []byte(" "))
	tag, text, ok3 := bytes.Cut(rest, []byte(" "))
	t, err := time.Parse(time.RFC3339Nano, string(ts))
	isStream := string(stream) == "stdout" || string(stream) == "stderr"
	if !ok1 || !ok2 || !ok3 || err != nil || !isStream || (string(tag) != "F" && string(tag) != "P") {
		return logRecord{text: line}
	}
	if string(tag) == "P" {
		// The launcher ends every record with a newline; a partial line's
		// text has none.
		text = bytes.TrimSuffix(text, []byte("\n"))
	}
	return logRecord{time: t, stderr: string(stream) == "stderr", text: text}
}

// records reads a log file's records in order.
type records struct {
	r *bufio.Reader
	c io.Closer
}

// next returns the next record, or io.EOF after the last.
func (rs *records) next() (logRecord, error) {
	line, err := rs.r.ReadBytes('\n')
	if len(line) > 0 {
		return parseRecord(line), nil
	}
	return logRecord{}, err
}

func (rs *records) Close() error { return rs.c.Close() }

// openLog opens the log of the container whose files are in dir at its
// last tail records (all of them when tail is negative); with follow, the
// records read on, as they are written, until the container exits or ctx
// ends. A container that has not started yet has an empty log.
func openLog(ctx context.Context, dir string, tail int, follow bool) (*records, error) {
	f, err := sandbox.OpenRegular(filepath.Join(dir, "log"))
	if errors.Is(err, os.ErrNotExist) {
		empty := io.NopCloser(strings.NewReader(""))
		return &records{r: bufio.NewReader(empty), c: empty}, nil
	}
	if err != nil {
		return nil, err
	}
	if tail >= 0 {
		off, err := tailOffset(f, tail)
		if err == nil {
			_, err = f.Seek(off, io.SeekStart)
		}
		if err != nil {
			f.Close()
			return nil, err
		}
	}
	var src io.ReadCloser = f
	if follow {
		exited := func() bool {
			_, err := os.Lstat(filepath.Join(dir, "exit"))
			return err == nil
		}
		src = &follower{ctx: ctx, f: f, name: filepath.Join(dir, "log"), done: exited}
	}
	return &records{r: bufio.NewReader(src), c: src}, nil
}

// GetContainerLogs implements node.LogsProvider: the container's output,
// both streams in the order read, as a kubelet serves it: the last
// opts.Tail lines, those from the since time on, each prefixed with its
// time with opts.Timestamps, and with opts.Follow what it writes next,
// until it exits. The API handler enforces opts.LimitBytes.
func (p *Provider) GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
	pj, _, err := p.containerOf(namespace, podName, containerName)
	if err != nil {
		return nil, err
	}
	rs, err := openLog(ctx, filepath.Join(pj.dir, "c", containerName), opts.Tail, opts.Follow)
	if err != nil {
		return nil, err
	}
	return &logReader{rs: rs, since: opts.Since(time.Now()), timestamps: opts.Timestamps}, nil
}

// logReader is a log's text as kubectl logs shows it.
type logReader struct {
	rs         *records
	since      time.Time // records before it are left out; zero: none are
	timestamps bool      // each record's text is prefixed with its time
	buf        bytes.Buffer
}

func (l *logReader) Read(b []byte) (int, error) {
	for l.buf.Len() == 0 {
		rec, err := l.rs.next()
		if err != nil {
			return 0, err
		}
		if !l.since.IsZero() && rec.time.Before(l.since) {
			continue
		}
		if l.timestamps && !rec.time.IsZero() {
			l.buf.WriteString(rec.time.Format(time.RFC3339Nano))
			l.buf.WriteByte(' ')
		}
		l.buf.Write(rec.text)
	}
	return l.buf.Read(b)
}

func (l *logReader) Close() error { return l.rs.Close() }

// tailOffset is where the last n lines (records) of f start.
func tailOffset(f *os.File, n int) (int64, error) {
	st, err := f.Stat()
	if err != nil {
		return 0, err
	}
	end := st.Size()
	if n == 0 {
		return end, nil
	}
	buf := make([]byte, 32<<10)
	pos, seen := end, 0
	for pos > 0 {
		size := int64(len(buf))
		if pos < size {
			size = pos
		}
		pos -= size
		chunk := buf[:size]
		if _, err := f.ReadAt(chunk, pos); err != nil {
			return 0, err
		}
		for i := len(chunk) - 1; i >= 0; i-- {
			// The final newline ends the last line; it does not start one.
			if chunk[i] == '\n' && pos+int64(i) != end-1 {
				if seen++; seen == n {
					return pos + int64(i) + 1, nil
				}
			}
		}
	}
	return 0, nil
}

// follower reads a log file and, at its end, waits for more until the
// container exits or the request ends.
type follower struct {
	ctx context.Context
	f   *os.File
	// name is the log's path: once the job rotates the file away, the
	// follower goes on in the new one.
	name string
	done func() bool
}

func (r *follower) Read(b []byte) (int, error) {
	for {
		// The exit check comes first: what was written before the exit is
		// read before EOF is returned.
		exited := r.done()
		n, err := r.f.Read(b)
		if n > 0 || !errors.Is(err, io.EOF) {
			return n, err
		}
		if next := r.rotated(); next != nil {
			// Nothing is written to the old file once it is renamed:
			// drain it, then go on in the new one.
			if n, err := r.f.Read(b); n > 0 {
				next.Close()
				return n, err
			}
			r.f.Close()
			r.f = next
			continue
		}
		if exited {
			return n, err
		}
		select {
		case <-r.ctx.Done():
			return 0, io.EOF
		case <-time.After(followPoll):
		}
	}
}

// rotated returns the log file at name when it is no longer the one being
// read, open at its start; nil otherwise.
func (r *follower) rotated() *os.File {
	cur, err1 := r.f.Stat()
	now, err2 := os.Lstat(r.name)
	if err1 != nil || err2 != nil || os.SameFile(cur, now) {
		return nil
	}
	f, err := sandbox.OpenRegular(r.name)
	if err != nil {
		return nil
	}
	return f
}

func (r *follower) Close() error { return r.f.Close() }
