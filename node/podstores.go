package node

import (
	"github.com/vkubelet/virtual-kubelet/node/internal/perpod"
	"github.com/vkubelet/virtual-kubelet/node/queue"
)

// The controller's per-pod state is kept by owners, each with a store of
// its own that it alone changes, as the kubelet's managers keep theirs:
//
//   - the pod records (podRecords): the lifecycle of each pod, its
//     allocation and resize included, whose decisions are pure functions
//     of one locked record;
//   - the start listing (podlisting.Start): the provider's pods when first
//     listed;
//   - the pod IPs (podips.Manager): decided once per pod, freed when it
//     ends;
//   - the volumes (podvolumes.Manager): what the provider was last given of
//     each pod's volumes, and its service-account tokens;
//   - the probes (prober.Manager): the workers and results of each pod's
//     probes;
//   - the queues' retry history (queueHistory).
//
// All of them learn that a pod ended through one hook, ended, and drop
// what they keep of it themselves.

// perPodStores returns the controller's stores of per-pod state, those of the
// managers it has.
func (pc *PodController) perPodStores() perpod.Stores {
	s := perpod.Stores{pc.pods, &pc.listing, queueHistory(pc.queues())}
	if pc.ips != nil {
		s = append(s, pc.ips)
	}
	if pc.volumes != nil {
		s = append(s, pc.volumes)
	}
	if pc.prober != nil {
		s = append(s, pc.prober)
	}
	return s
}

// forget drops everything the controller keeps for key.
func (pc *PodController) forget(key string) {
	pc.ended(key, perpod.Gone)
}

// ended is the one hook by which the stores of per-pod state learn that
// key's pod ended (see perpod.End), each to drop what it keeps of it.
func (pc *PodController) ended(key string, end perpod.End) {
	pc.stores.PodEnded(key, end)
}

// queueHistory is the work queues' per-key state: a key waiting, and its
// retry history, forgotten once the pod is gone.
type queueHistory []*queue.Queue

// PodEnded forgets a key that is gone.
func (h queueHistory) PodEnded(key string, end perpod.End) {
	if end != perpod.Gone {
		return
	}
	for _, q := range h {
		q.Forget(key)
	}
}

// Len is the number of keys waiting or being handled in the queues.
func (h queueHistory) Len() int {
	n := 0
	for _, q := range h {
		n += q.Len()
	}
	return n
}
