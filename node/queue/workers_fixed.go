//go:build vk_workqueue

package queue

import "k8s.io/client-go/util/workqueue"

// workerPool is empty: the fixed workers need no state beyond q.run's.
type workerPool struct{}

// newWorkQueue is client-go's rate-limiting queue as it comes: its delaying
// queue (a goroutine, a heap and a heartbeat per queue) and its metrics
// (with a goroutine per queue for the unfinished-work gauges).
func (q *Queue) newWorkQueue(limiter workqueue.TypedRateLimiter[string]) workqueue.TypedRateLimitingInterface[string] {
	return workqueue.NewTypedRateLimitingQueueWithConfig(limiter, workqueue.TypedRateLimitingQueueConfig[string]{
		Name:            q.name,
		MetricsProvider: q.metricsProvider,
	})
}

// startWorkers starts the workers, which run until the queue shuts down,
// as a client-go controller's do.
func (q *Queue) startWorkers() {
	q.run.Lock()
	ctx, n := q.run.ctx, q.run.workers
	q.run.Unlock()
	for range n {
		q.run.wg.Go(func() {
			for {
				key, shutdown := q.queue().Get()
				if shutdown {
					return
				}
				if ctx.Err() != nil {
					// Keys still waiting at shutdown are dropped, as
					// the on-demand workers drop them.
					q.queue().Done(key)
					continue
				}
				q.handle(ctx, key)
			}
		})
	}
}
