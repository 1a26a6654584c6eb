package ha

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/leaderelection/resourcelock"
)

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%d", prefix, i)
	}
	return out
}

func loads(a map[string]string) map[string]int {
	out := map[string]int{}
	for _, m := range a {
		out[m]++
	}
	return out
}

func TestAssignIsEvenAndTheSameEverywhere(t *testing.T) {
	for _, c := range []struct{ nodes, members int }{{6, 3}, {30, 3}, {1000, 10}, {7, 3}, {2, 3}} {
		nodes, members := names("vk", c.nodes), names("replica", c.members)
		a := Assign(nodes, members)
		if len(a) != c.nodes {
			t.Fatalf("%d nodes, %d members: %d assigned", c.nodes, c.members, len(a))
		}
		share := (c.nodes + c.members - 1) / c.members
		for m, n := range loads(a) {
			if n > share {
				t.Errorf("%d nodes, %d members: %s got %d, share %d", c.nodes, c.members, m, n, share)
			}
		}
		reversed := slices.Clone(members)
		slices.Reverse(reversed)
		if b := Assign(nodes, reversed); !mapsEqual(a, b) {
			t.Errorf("%d nodes, %d members: the assignment depends on the members' order", c.nodes, c.members)
		}
	}
}

// A replica leaving gives its nodes to the others; most of theirs stay.
func TestAssignMovesLittleWhenAReplicaLeaves(t *testing.T) {
	nodes, members := names("vk", 300), names("replica", 3)
	before := Assign(nodes, members)
	after := Assign(nodes, members[1:])
	moved := 0
	for _, n := range nodes {
		if before[n] != members[0] && before[n] != after[n] {
			moved++
		}
		if after[n] == members[0] {
			t.Fatalf("node %s still on the replica that left", n)
		}
	}
	if moved > len(nodes)/10 {
		t.Errorf("%d of the remaining replicas' nodes moved, want few", moved)
	}
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

func TestFenceRefusesRequestsOnceDown(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))
	defer srv.Close()
	client := &http.Client{Transport: FencedTransport(http.DefaultTransport)}
	get := func(ctx context.Context) error {
		req, _ := http.NewRequestWithContext(ctx, http.MethodGet, srv.URL, nil)
		resp, err := client.Do(req)
		if err == nil {
			resp.Body.Close()
		}
		return err
	}

	f := NewFence("vk-0", 200*time.Millisecond)
	f.renewed(time.Now())
	ctx, cancel := f.Context(context.Background())
	defer cancel()
	if err := get(ctx); err != nil {
		t.Fatalf("request while the fence is up: %v", err)
	}
	select {
	case <-ctx.Done():
	case <-time.After(5 * time.Second):
		t.Fatal("the fence's context was not cancelled when the fence went down")
	}
	if err := get(context.WithoutCancel(ctx)); !errors.Is(err, ErrFenced) {
		t.Errorf("request after the fence went down: %v, want ErrFenced", err)
	}
	if err := get(context.Background()); err != nil {
		t.Errorf("request without a fence: %v", err)
	}
}

func TestHolderLockTakesOnlyWhenPreferred(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	factory := informers.NewSharedInformerFactory(client, 0)
	leases := factory.Coordination().V1().Leases()
	preferred := false
	fence := NewFence("vk-0", time.Minute)
	term := &serving{served: make(chan struct{})}
	l := &holderLock{
		name: HolderLeaseName("vk-0"), namespace: "ns", identity: "me",
		client: client.CoordinationV1(), cache: leases.Lister().Leases("ns"),
		mayAcquire: func() bool { return preferred }, fence: fence, term: term,
	}
	if _, _, err := l.Get(ctx); !apierrors.IsNotFound(err) {
		t.Fatalf("Get of a missing lease: %v", err)
	}
	record := resourcelock.LeaderElectionRecord{HolderIdentity: "me", LeaseDurationSeconds: 15, RenewTime: metav1.Now()}
	if err := l.Create(ctx, record); !errors.Is(err, errNotPreferred) {
		t.Fatalf("Create while not preferred: %v", err)
	}
	preferred = true
	if err := l.Create(ctx, record); err != nil || !fence.Valid() {
		t.Fatalf("Create while preferred: %v, fence up %v", err, fence.Valid())
	}
	preferred = false
	if err := l.Update(ctx, record); err != nil {
		t.Fatalf("renewal by the holder, no longer preferred: %v", err)
	}
	release := resourcelock.LeaderElectionRecord{LeaseDurationSeconds: 1}
	if err := l.Update(ctx, release); !errors.Is(err, errStillServing) {
		t.Fatalf("release while serving: %v", err)
	}
	term.end()
	if err := l.Update(ctx, release); err != nil || fence.Valid() {
		t.Fatalf("release: %v, fence up %v", err, fence.Valid())
	}
	if err := l.Update(ctx, record); !errors.Is(err, errNotPreferred) {
		t.Fatalf("taking a released lease while not preferred: %v", err)
	}
}

func TestReplicasStartedTogetherSplitTheNodes(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset()
	nodes := names("vk-", 40)
	start := func(id string) *Members {
		m, err := StartMembers(ctx, Config{
			Client: client, Namespace: "ns", Identity: id, Nodes: nodes, Group: "vk",
			LeaseDuration: 15 * time.Second, RenewDeadline: 10 * time.Second, RetryPeriod: 200 * time.Millisecond,
		})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	first := start("a")
	takes := func(m *Members) (n int) {
		for _, node := range nodes {
			if (&holding{members: m, node: node}).preferred() {
				n++
			}
		}
		return n
	}
	if n := takes(first); n != 0 {
		t.Fatalf("the first replica takes %d nodes while it is joining; want none", n)
	}
	second := start("b")
	if err := wait.PollUntilContextTimeout(ctx, 20*time.Millisecond, 10*time.Second, true, func(context.Context) (bool, error) {
		return !first.Joining() && !second.Joining(), nil
	}); err != nil {
		t.Fatal(err)
	}
	if a, b := takes(first), takes(second); a != 20 || b != 20 {
		t.Errorf("after joining the replicas take %d and %d of 40 nodes; want 20 each", a, b)
	}
}
