// Package perpod is how the pod controller tells the parts that keep state
// per pod that a pod ended, so that each drops its own state: one hook, as
// the kubelet's pod workers tell its status, probe and allocation managers.
package perpod

// End is how far a pod's run has ended.
type End int

const (
	// Finished means the pod reached a terminal phase. Its object stays, but
	// what only a running pod holds (its IPs) is freed.
	Finished End = iota + 1
	// Replaced means a new pod (another UID) took the name; what was kept of
	// the earlier one goes.
	Replaced
	// Gone means the pod's object is gone and the controller is done with its
	// key; everything kept of the key goes.
	Gone
)

// String names the end, for logs and test failures.
func (e End) String() string {
	switch e {
	case Finished:
		return "Finished"
	case Replaced:
		return "Replaced"
	case Gone:
		return "Gone"
	}
	return "End(?)"
}

// Store is state kept per pod key by one owner, which alone adds and drops
// its entries.
type Store interface {
	// PodEnded drops what the store keeps of key that end makes stale.
	PodEnded(key string, end End)
	// Len is the number of pod keys the store holds something for.
	Len() int
}

// Stores are the stores of one controller, told of each end together.
type Stores []Store

// PodEnded tells every store that key's pod ended.
func (s Stores) PodEnded(key string, end End) {
	for _, st := range s {
		st.PodEnded(key, end)
	}
}
