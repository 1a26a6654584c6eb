// Package queue runs a handler over keys from a typed, rate-limited client-go
// work queue with a pluggable retry policy. The pod controller uses three of
// them; provider authors meet it through ShouldRetryFunc.
package queue

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"golang.org/x/time/rate"
	"k8s.io/client-go/util/workqueue"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace"
)

// ShouldRetryFunc decides what happens to a key whose handler failed. It is
// told how many times the key has been tried since it last succeeded and when
// it was first added. It returns a nil error to retry: after the returned delay,
// or, if that is nil, after the queue's rate limiter's delay. A non-nil error
// gives the key up; the error is logged.
type ShouldRetryFunc func(ctx context.Context, key string, timesTried int, originallyAdded time.Time, err error) (*time.Duration, error)

// MaxRetries is how many times DefaultRetryFunc tries a key.
const MaxRetries = 20

// DefaultRetryFunc retries a key up to MaxRetries times, paced by the rate
// limiter.
func DefaultRetryFunc(_ context.Context, key string, timesTried int, _ time.Time, err error) (*time.Duration, error) {
	if timesTried < MaxRetries {
		return nil, nil
	}
	return nil, fmt.Errorf("giving up on %s after %d tries: %w", key, timesTried, err)
}

// Handler processes one key. A returned error hands the key to the retry policy.
type Handler func(ctx context.Context, key string) error

// DefaultRateLimiter is the limiter queues use unless configured otherwise:
// per-key exponential backoff from 5ms to 30s, and at most 100 retries a
// second overall (bursts of 1000) so an outage does not become a retry storm.
// Plain adds are never limited. Limiters take any items, as the prior
// virtual-kubelet's configuration did; the queue's keys are strings.
func DefaultRateLimiter() workqueue.TypedRateLimiter[any] {
	return workqueue.NewTypedMaxOfRateLimiter(
		workqueue.NewTypedItemExponentialFailureRateLimiter[any](5*time.Millisecond, 30*time.Second),
		&workqueue.TypedBucketRateLimiter[any]{Limiter: rate.NewLimiter(100, 1000)},
	)
}

// stringKeys adapts a limiter of any items to the queue's string keys.
type stringKeys struct {
	l workqueue.TypedRateLimiter[any]
}

func (s stringKeys) When(key string) time.Duration { return s.l.When(key) }
func (s stringKeys) Forget(key string)             { s.l.Forget(key) }
func (s stringKeys) NumRequeues(key string) int    { return s.l.NumRequeues(key) }

// Queue is a named work queue with a handler and a retry policy.
type Queue struct {
	name    string
	handler Handler
	retry   ShouldRetryFunc

	// made is the work queue, made with limiter at the first key (see
	// queue): a process of a thousand idle nodes has four thousand queues.
	made     atomic.Pointer[workqueue.TypedRateLimitingInterface[string]]
	limiter  workqueue.TypedRateLimiter[any]
	shutDown bool // guarded by mu: a queue made after ShutDown starts shut down

	gaveUp func(ctx context.Context, key string)
	// metricsProvider is WithMetrics's; nil reports through client-go's
	// global provider.
	metricsProvider workqueue.MetricsProvider

	mu         sync.Mutex
	items      keyMap[*itemState]
	processing int

	// run is the state of the workers; ctx is nil before Start and once
	// the queue has stopped.
	run struct {
		sync.Mutex
		ctx     context.Context
		workers int
		wg      sync.WaitGroup
		stopped chan struct{}
	}
	// pool is what the build's worker pool keeps (workers_ondemand.go,
	// or workers_fixed.go under the build tag vk_workqueue).
	pool workerPool
}

type itemState struct {
	added time.Time
	tries int
}

// unfinishedUpdatePeriod is how often the unfinished-work gauges are
// updated, client-go's period.
const unfinishedUpdatePeriod = 500 * time.Millisecond

// Option configures a queue.
type Option func(*Queue)

// WithMetrics has the queue report client-go's work queue metrics (depth,
// adds, queue and work durations, unfinished work, retries) through p.
// Without it the queue reports through client-go's global provider
// (workqueue.SetProvider), as any client-go queue does, except retries.
func WithMetrics(p workqueue.MetricsProvider) Option {
	return func(q *Queue) { q.metricsProvider = p }
}

// New returns a queue. A nil limiter means DefaultRateLimiter and a nil retry
// policy means DefaultRetryFunc. The name labels the queue's metrics and spans.
func New(name string, limiter workqueue.TypedRateLimiter[any], retry ShouldRetryFunc, handler Handler, opts ...Option) *Queue {
	if retry == nil {
		retry = DefaultRetryFunc
	}
	q := &Queue{
		name:    name,
		handler: handler,
		retry:   retry,
		limiter: limiter,
	}
	for _, o := range opts {
		o(q)
	}
	q.run.stopped = make(chan struct{})
	return q
}

// queue returns the work queue, made on the first call.
func (q *Queue) queue() workqueue.TypedRateLimitingInterface[string] {
	if w := q.made.Load(); w != nil {
		return *w
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if w := q.made.Load(); w != nil {
		return *w
	}
	limiter := q.limiter
	if limiter == nil {
		limiter = DefaultRateLimiter()
	}
	w := q.newWorkQueue(stringKeys{limiter})
	if q.shutDown {
		w.ShutDown()
	}
	q.made.Store(&w)
	return w
}

// waiting is the number of keys waiting for a worker, without making the
// work queue.
func (q *Queue) waiting() int {
	if w := q.made.Load(); w != nil {
		return (*w).Len()
	}
	return 0
}

// OnGiveUp sets f to be called with each key the retry policy gives up on,
// so the caller can drop what it keeps for the key. Call it before Start.
func (q *Queue) OnGiveUp(f func(ctx context.Context, key string)) { q.gaveUp = f }

// Name returns the queue's name.
func (q *Queue) Name() string { return q.name }

// Enqueue adds key now, without rate limiting. A key already waiting is not
// added twice; a key being handled is handled again afterwards.
func (q *Queue) Enqueue(key string) {
	q.note(key)
	q.queue().Add(key)
}

// EnqueueAfter adds key after d.
func (q *Queue) EnqueueAfter(key string, d time.Duration) {
	q.note(key)
	q.queue().AddAfter(key, d)
}

// Forget clears the retry history of key; a waiting key stays queued.
func (q *Queue) Forget(key string) {
	q.mu.Lock()
	q.items.remove(key)
	q.mu.Unlock()
	if w := q.made.Load(); w != nil {
		(*w).Forget(key)
	}
}

// Len is the number of keys waiting or being handled: UnprocessedLen plus
// ItemsBeingProcessedLen. Keys waiting out a retry delay are not counted.
func (q *Queue) Len() int { return q.UnprocessedLen() + q.ItemsBeingProcessedLen() }

// UnprocessedLen is the number of keys waiting for a worker.
func (q *Queue) UnprocessedLen() int { return q.waiting() }

// ItemsBeingProcessedLen is the number of keys a worker is handling.
func (q *Queue) ItemsBeingProcessedLen() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.processing
}

func (q *Queue) note(key string) {
	q.mu.Lock()
	if _, ok := q.items.get(key); !ok {
		q.items.set(key, &itemState{added: time.Now()})
	}
	q.mu.Unlock()
}

// Start handles keys until ctx ends, with up to workers goroutines (see
// startWorkers for when they run). Once ctx ends the queue shuts down and
// takes no more keys; Wait waits for the keys being handled. Call Start once.
func (q *Queue) Start(ctx context.Context, workers int) {
	q.run.Lock()
	q.run.ctx = ctx
	q.run.workers = max(workers, 1)
	q.run.Unlock()
	context.AfterFunc(ctx, func() {
		q.run.Lock()
		q.run.ctx = nil
		q.run.Unlock()
		q.ShutDown()
		close(q.run.stopped)
	})
	q.startWorkers()
}

// Wait returns once the queue has shut down, after Start, and no key is
// being handled.
func (q *Queue) Wait() {
	<-q.run.stopped
	q.run.wg.Wait()
}

// Run is Start followed by Wait: it handles keys until ctx ends, then waits
// for the keys being handled.
func (q *Queue) Run(ctx context.Context, workers int) {
	q.Start(ctx, workers)
	q.Wait()
}

// ShutDown stops the queue without running it: for a caller that returns
// before Start. Keys are no longer accepted.
func (q *Queue) ShutDown() {
	q.mu.Lock()
	q.shutDown = true
	q.mu.Unlock()
	if w := q.made.Load(); w != nil {
		(*w).ShutDown()
	}
}

// handle runs the handler on key, which the caller took from the queue, and
// hands a failure to the retry policy.
func (q *Queue) handle(ctx context.Context, key string) {
	defer q.queue().Done(key)
	q.mu.Lock()
	q.processing++
	q.mu.Unlock()
	defer func() {
		q.mu.Lock()
		q.processing--
		q.mu.Unlock()
	}()

	ctx, span := trace.StartSpan(ctx, q.name)
	defer span.End()
	ctx = span.WithFields(ctx, log.Fields{"queue": q.name, "key": key})

	err := q.handler(ctx, key)
	if err == nil {
		q.Forget(key)
		return
	}
	span.SetStatus(err)

	q.mu.Lock()
	st, ok := q.items.get(key)
	if !ok {
		st = &itemState{added: time.Now()}
		q.items.set(key, st)
	}
	st.tries++
	tries, added := st.tries, st.added
	q.mu.Unlock()

	delay, giveUp := q.retry(ctx, key, tries, added, err)
	switch {
	case giveUp != nil:
		log.G(ctx).WithError(giveUp).Error("not retrying")
		q.Forget(key)
		if q.gaveUp != nil {
			q.gaveUp(ctx, key)
		}
	case delay != nil:
		log.G(ctx).WithError(err).Debugf("retrying in %s", *delay)
		q.queue().AddAfter(key, *delay)
	default:
		log.G(ctx).WithError(err).Debug("retrying")
		q.queue().AddRateLimited(key)
	}
}
