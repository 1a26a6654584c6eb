package logging

import (
	"bytes"
	"fmt"
	"io"
	"sync"
	"sync/atomic"
	"time"

	"k8s.io/utils/buffer"
)

// queuedLines is how many log lines may wait for the output, a few MB.
const queuedLines = 16384

// dropped counts the lines the process dropped, for its metric.
var dropped atomic.Uint64

// Dropped is how many log lines the process has dropped because its log
// output could not keep up.
func Dropped() uint64 { return dropped.Load() }

// lineQueue is the log output: whoever logs hands its line over without
// waiting for the output to take it. A slow disk or pipe must not hold a
// request, and the connection it came on, while thousands of others log
// too (a storm of failed authorizations under load): one goroutine writes
// the lines out in order, and while the queue is full new lines are dropped
// and counted, the count written out once the output keeps up again.
type lineQueue struct {
	out io.Writer
	max int
	// behind is the lines dropped since the output last kept up.
	behind atomic.Uint64

	mu sync.Mutex
	// pending are the lines waiting for the output, at most max. The ring
	// grows with them and gives its storage up once read empty (its
	// normal size is 0): a queue sized for a storm holds nothing while the
	// output keeps up.
	pending buffer.Ring[[]byte]
	// flushed ends the queue: once set, no line is queued that nothing
	// will write.
	flushed bool
	// queued wakes the writing goroutine.
	queued chan struct{}
	// writeMu orders writes to out: the queue's, and those after flush.
	writeMu sync.Mutex
	stop    chan struct{}
	done    chan struct{}
}

func newLineQueue(out io.Writer, size int) *lineQueue {
	q := &lineQueue{out: out, max: size, queued: make(chan struct{}, 1), stop: make(chan struct{}), done: make(chan struct{})}
	go q.run()
	return q
}

// Write queues a copy of p (logrus reuses its buffer), or drops it when
// the queue is full; after flush it writes p at once.
func (q *lineQueue) Write(p []byte) (int, error) {
	q.mu.Lock()
	if q.flushed {
		q.mu.Unlock()
		q.writeMu.Lock()
		defer q.writeMu.Unlock()
		return q.out.Write(p)
	}
	if q.pending.Len() >= q.max {
		q.mu.Unlock()
		q.behind.Add(1)
		dropped.Add(1)
		return len(p), nil
	}
	q.pending.WriteOne(bytes.Clone(p))
	q.mu.Unlock()
	select {
	case q.queued <- struct{}{}:
	default:
	}
	return len(p), nil
}

// next takes the first line waiting, if any.
func (q *lineQueue) next() ([]byte, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.pending.ReadOne()
}

func (q *lineQueue) run() {
	defer close(q.done)
	for {
		if line, ok := q.next(); ok {
			q.write(line)
			continue
		}
		select {
		case <-q.queued:
		case <-q.stop:
			for line, ok := q.next(); ok; line, ok = q.next() {
				q.write(line)
			}
			q.write(nil)
			return
		}
	}
}

// write writes line out, after the count of lines dropped before it.
func (q *lineQueue) write(line []byte) {
	q.writeMu.Lock()
	defer q.writeMu.Unlock()
	if n := q.behind.Swap(0); n > 0 {
		// logrus' text format, so that the line reads like the others.
		fmt.Fprintf(q.out, "time=%q level=warning msg=\"log output fell behind: %d lines dropped\"\n", time.Now().Format(time.RFC3339), n)
	}
	if line != nil {
		_, _ = q.out.Write(line) // where would a failed log write be reported?
	}
}

// flush writes out the queued lines and ends the queue: later lines are
// written as they come. It is safe to call more than once.
func (q *lineQueue) flush() {
	q.mu.Lock()
	first := !q.flushed
	q.flushed = true
	q.mu.Unlock()
	if first {
		close(q.stop)
	}
	<-q.done
}
