package node

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/internal/perpod"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// storesProvider has every capability that makes the controller keep
// state per pod: volumes, probes (exec), and IPs from the node's CIDRs.
type storesProvider struct{ nopProvider }

func (storesProvider) SetPodVolumes(context.Context, *corev1.Pod, *volume.Contents) error {
	return nil
}
func (storesProvider) PodNetworkReachable() bool { return false }
func (storesProvider) RunInContainer(context.Context, string, string, string, []string, api.AttachIO) error {
	return nil
}

// storeLens is how many keys each store of pc holds, by position.
func storeLens(pc *PodController) []int {
	out := make([]int, len(pc.stores))
	for i, s := range pc.stores {
		out[i] = s.Len()
	}
	return out
}

// TestPodEndClearsEveryStore: each store keeps a pod until told of its
// end through the one hook, and drops what that end makes stale: a
// finished pod only its IPs (its probes too, which stop), a pod gone
// everything.
func TestPodEndClearsEveryStore(t *testing.T) {
	pc := ipController(t, storesProvider{}, []string{"10.244.3.0/24"}, nil)
	defer pc.prober.Stop()
	if len(pc.stores) != 6 {
		t.Fatalf("%d stores, want the records, listing, queues, IPs, volumes and probes", len(pc.stores))
	}
	ctx := context.Background()
	pod := testPod("u1", podRunning)
	pod.Spec.Containers = []corev1.Container{{Name: "app", ReadinessProbe: &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"true"}}}, PeriodSeconds: 60}}}
	key := podKey(pod)

	pc.pods.get(key).handedOver(pod)
	pc.listing.Taken([]string{key}, func(string) bool { return false })
	if _, err := pc.withPodIPs(ctx, pod); err != nil {
		t.Fatal(err)
	}
	if err := pc.setVolumes(ctx, pod, pod); err != nil {
		t.Fatal(err)
	}
	pc.probed(pod, pod.Status)
	for i, n := range storeLens(pc) {
		// The queues hold a key while it waits or is handled: none here.
		if _, queues := pc.stores[i].(queueHistory); n != 1 && !queues {
			t.Fatalf("store %T holds %d keys, want 1", pc.stores[i], n)
		}
	}

	pc.ended(key, perpod.Finished)
	if n := pc.ips.InUse(); n != 0 {
		t.Errorf("a finished pod holds %d addresses", n)
	}
	if pc.pods.Len() != 1 || pc.volumes.Len() != 1 {
		t.Error("a finished pod lost its record or volumes while its object stays")
	}

	pc.forget(key)
	for i, n := range storeLens(pc) {
		if n != 0 {
			t.Errorf("store %T holds %d keys after the pod is gone", pc.stores[i], n)
		}
	}
}
