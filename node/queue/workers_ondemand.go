//go:build !vk_workqueue

package queue

import "k8s.io/client-go/util/workqueue"

// workerPool is the state of workers started on demand. Its counts are
// guarded by q.run's lock.
type workerPool struct {
	// busy is the number of workers running.
	busy int
	// metrics reports WithMetrics's metrics; nil without it.
	metrics *queueMetrics
}

// newWorkQueue stacks client-go's queue and rate limiter on timerDelays,
// with the adds and Dones waking workers, and reports WithMetrics's metrics
// itself, without the goroutine client-go keeps per queue for them.
func (q *Queue) newWorkQueue(limiter workqueue.TypedRateLimiter[string]) workqueue.TypedRateLimitingInterface[string] {
	config := workqueue.TypedQueueConfig[string]{Name: q.name}
	if q.metricsProvider != nil {
		q.pool.metrics = newQueueMetrics(q.metricsProvider, q.name)
		config.Name = "" // reported by q.pool.metrics instead
	}
	delays := newTimerDelays(waking{workqueue.NewTypedWithConfig(config), q}, q.pool.metrics.retried)
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{Name: q.name, DelayingQueue: delays})
}

// startWorkers starts workers as keys wait, each ended when none does: an
// idle queue costs no goroutine (a process of a thousand nodes has four
// thousand queues, and every goroutine costs its stack).
func (q *Queue) startWorkers() { q.wake() }

// wake starts workers for the waiting keys, up to the maximum. Start, every
// add and every Done (which may put a key back) call it. A worker started
// for a key another worker takes first finds none and ends.
func (q *Queue) wake() {
	q.run.Lock()
	defer q.run.Unlock()
	if q.run.ctx == nil {
		return
	}
	for n := min(q.run.workers-q.pool.busy, q.waiting()); n > 0; n-- {
		q.pool.busy++
		q.run.wg.Go(q.work)
	}
}

// work handles keys until none waits. The check and the Get are made under
// q.run's lock, so no worker blocks in Get on an empty queue.
func (q *Queue) work() {
	for {
		q.run.Lock()
		ctx := q.run.ctx
		if ctx == nil || q.waiting() == 0 {
			q.pool.busy--
			q.run.Unlock()
			return
		}
		key, _ := q.queue().Get()
		q.pool.metrics.taken(key)
		q.run.Unlock()
		q.handle(ctx, key)
	}
}

// waking is the queue's bottom layer: it tells the queue of every add, and
// of every Done, which puts back a key added while it was being handled.
type waking struct {
	workqueue.TypedInterface[string]
	q *Queue
}

func (w waking) Add(key string) {
	if !w.ShuttingDown() {
		w.q.pool.metrics.added(key)
	}
	w.TypedInterface.Add(key)
	w.q.wake()
}

func (w waking) Done(key string) {
	w.q.pool.metrics.done(key)
	w.TypedInterface.Done(key)
	w.q.wake()
}
