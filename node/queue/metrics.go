//go:build !vk_workqueue

package queue

import (
	"sync"
	"time"

	"k8s.io/client-go/util/workqueue"
)

// A nil *queueMetrics reports nothing.
//
// queueMetrics reports a queue's client-go work queue metrics itself, with
// the meaning client-go gives them. client-go's queue keeps a goroutine per
// queue to update the unfinished-work gauges every half second; here one
// goroutine does it for the queues that have keys in hand, and none runs
// while every queue is idle.
type queueMetrics struct {
	depth      workqueue.GaugeMetric
	adds       workqueue.CounterMetric
	latency    workqueue.HistogramMetric
	work       workqueue.HistogramMetric
	unfinished workqueue.SettableGaugeMetric
	longest    workqueue.SettableGaugeMetric
	retries    workqueue.CounterMetric

	mu sync.Mutex
	// waiting holds when each waiting key was added; handling, when each
	// key in hand was taken.
	waiting  keyMap[time.Time]
	handling keyMap[time.Time]
}

// retried counts a delayed add, which client-go counts as a retry.
func (m *queueMetrics) retried() {
	if m != nil {
		m.retries.Inc()
	}
}

func newQueueMetrics(p workqueue.MetricsProvider, name string) *queueMetrics {
	return &queueMetrics{
		depth:      p.NewDepthMetric(name),
		adds:       p.NewAddsMetric(name),
		latency:    p.NewLatencyMetric(name),
		work:       p.NewWorkDurationMetric(name),
		unfinished: p.NewUnfinishedWorkSecondsMetric(name),
		longest:    p.NewLongestRunningProcessorSecondsMetric(name),
		retries:    p.NewRetriesMetric(name),
	}
}

// added counts key unless it is waiting already.
func (m *queueMetrics) added(key string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.waiting.get(key); ok {
		return
	}
	m.waiting.set(key, time.Now())
	m.adds.Inc()
	m.depth.Inc()
}

// taken records that a worker took key.
func (m *queueMetrics) taken(key string) {
	if m == nil {
		return
	}
	now := time.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	if at, ok := m.waiting.get(key); ok {
		m.depth.Dec()
		m.latency.Observe(now.Sub(at).Seconds())
		m.waiting.remove(key)
	}
	m.handling.set(key, now)
	if m.handling.len() == 1 {
		busyQueues.add(m)
	}
}

// done records that the worker is done with key.
func (m *queueMetrics) done(key string) {
	if m == nil {
		return
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	at, ok := m.handling.get(key)
	if !ok {
		return
	}
	m.work.Observe(time.Since(at).Seconds())
	m.handling.remove(key)
	if m.handling.len() == 0 {
		m.unfinished.Set(0)
		m.longest.Set(0)
		busyQueues.remove(m)
	}
}

// updateUnfinished sets the gauges of the work in hand.
func (m *queueMetrics) updateUnfinished(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var total, longest float64
	for at := range m.handling.values() {
		d := now.Sub(at).Seconds()
		total += d
		longest = max(longest, d)
	}
	m.unfinished.Set(total)
	m.longest.Set(longest)
}

// busyQueues are the queues with keys in hand; a goroutine updates their
// unfinished-work gauges while there is one.
var busyQueues = &queueSet{queues: map[*queueMetrics]struct{}{}}

type queueSet struct {
	mu      sync.Mutex
	queues  map[*queueMetrics]struct{}
	running bool
}

func (s *queueSet) add(m *queueMetrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queues[m] = struct{}{}
	if !s.running {
		s.running = true
		go s.update()
	}
}

func (s *queueSet) remove(m *queueMetrics) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.queues, m)
}

// update ticks until no queue is busy.
func (s *queueSet) update() {
	t := time.NewTicker(unfinishedUpdatePeriod)
	defer t.Stop()
	var busy []*queueMetrics
	for now := range t.C {
		s.mu.Lock()
		if len(s.queues) == 0 {
			s.running = false
			s.mu.Unlock()
			return
		}
		busy = busy[:0]
		for m := range s.queues {
			busy = append(busy, m)
		}
		s.mu.Unlock()
		for _, m := range busy {
			m.updateUnfinished(now)
		}
	}
}
