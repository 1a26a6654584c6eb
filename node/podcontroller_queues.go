package node

import "github.com/vkubelet/virtual-kubelet/node/queue"

// ShouldRetryFunc decides whether and when a pod controller queue retries a
// key whose handler failed; see queue.ShouldRetryFunc.
type ShouldRetryFunc = queue.ShouldRetryFunc

// DefaultRetryFunc retries a key up to MaxRetries times. No queue of the
// pod controller uses it unless configured to (their default retries until
// the error is permanent); it is here for configurations written for the
// prior virtual-kubelet.
var DefaultRetryFunc = queue.DefaultRetryFunc

// MaxRetries is how many times DefaultRetryFunc tries a key.
var MaxRetries = queue.MaxRetries

// SyncPodsFromKubernetesQueueLen is the number of keys waiting in or being
// handled by the queue that hands pods to the provider.
func (pc *PodController) SyncPodsFromKubernetesQueueLen() int { return pc.syncQueue.Len() }

// SyncPodsFromKubernetesQueueItemsBeingProcessedLen is the number of keys a
// worker of that queue is handling.
func (pc *PodController) SyncPodsFromKubernetesQueueItemsBeingProcessedLen() int {
	return pc.syncQueue.ItemsBeingProcessedLen()
}

// SyncPodsFromKubernetesQueueUnprocessedLen is the number of keys of that
// queue waiting for a worker.
func (pc *PodController) SyncPodsFromKubernetesQueueUnprocessedLen() int {
	return pc.syncQueue.UnprocessedLen()
}

// DeletePodsFromKubernetesQueueLen is the number of keys waiting in or being
// handled by the queue that removes deleted pods from Kubernetes.
func (pc *PodController) DeletePodsFromKubernetesQueueLen() int { return pc.deleteQueue.Len() }

// DeletePodsFromKubernetesQueueItemsBeingProcessedLen is the number of keys
// a worker of that queue is handling.
func (pc *PodController) DeletePodsFromKubernetesQueueItemsBeingProcessedLen() int {
	return pc.deleteQueue.ItemsBeingProcessedLen()
}

// DeletePodsFromKubernetesQueueUnprocessedLen is the number of keys of that
// queue waiting for a worker.
func (pc *PodController) DeletePodsFromKubernetesQueueUnprocessedLen() int {
	return pc.deleteQueue.UnprocessedLen()
}

// SyncPodStatusFromProviderQueueLen is the number of keys waiting in or
// being handled by the queue that writes the provider's pod statuses.
func (pc *PodController) SyncPodStatusFromProviderQueueLen() int { return pc.statusQueue.Len() }

// SyncPodStatusFromProviderQueueItemsBeingProcessedLen is the number of keys
// a worker of that queue is handling.
func (pc *PodController) SyncPodStatusFromProviderQueueItemsBeingProcessedLen() int {
	return pc.statusQueue.ItemsBeingProcessedLen()
}

// SyncPodStatusFromProviderQueueUnprocessedLen is the number of keys of that
// queue waiting for a worker.
func (pc *PodController) SyncPodStatusFromProviderQueueUnprocessedLen() int {
	return pc.statusQueue.UnprocessedLen()
}

// queueOptions configures the controller's queues from cfg.
func queueOptions(cfg PodControllerConfig) []queue.Option {
	if cfg.QueueMetrics == nil {
		return nil
	}
	return []queue.Option{queue.WithMetrics(cfg.QueueMetrics)}
}

// queues are the controller's work queues: the volume queue too, if there
// is one.
func (pc *PodController) queues() []*queue.Queue {
	qs := []*queue.Queue{pc.syncQueue, pc.statusQueue, pc.deleteQueue}
	if pc.volumeQueue != nil {
		qs = append(qs, pc.volumeQueue)
	}
	return qs
}
