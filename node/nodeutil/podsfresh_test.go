package nodeutil

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"
	"k8s.io/client-go/tools/cache"
)

func versioned(name, uid, rv string) *corev1.Pod {
	p := pod(name, "n")
	p.UID, p.ResourceVersion = types.UID(uid), rv
	return p
}

func TestCaughtUp(t *testing.T) {
	list := func(rv string, pods ...*corev1.Pod) *corev1.PodList {
		l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv}}
		for _, p := range pods {
			l.Items = append(l.Items, *p)
		}
		return l
	}
	cache := func(pods ...*corev1.Pod) []any {
		var out []any
		for _, p := range pods {
			out = append(out, p)
		}
		return out
	}
	for _, tc := range []struct {
		name   string
		cached []any
		listed *corev1.PodList
		want   bool
	}{
		{"both empty", nil, list("100"), true},
		{"same versions", cache(versioned("a", "u1", "90")), list("100", versioned("a", "u1", "90")), true},
		{"cache newer than the list", cache(versioned("a", "u1", "120")), list("100", versioned("a", "u1", "90")), true},
		{"cache behind a listed pod", cache(versioned("a", "u1", "80")), list("100", versioned("a", "u1", "90")), false},
		{"listed pod not cached yet", nil, list("100", versioned("a", "u1", "90")), false},
		{"cached pod deleted before the list", cache(versioned("a", "u1", "80")), list("100"), false},
		{"cached pod created after the list", cache(versioned("b", "u2", "110")), list("100"), true},
		{"same name, older pod still cached", cache(versioned("a", "u0", "50")), list("100", versioned("a", "u1", "90")), false},
		{"same name, newer pod created after the list", cache(versioned("a", "u2", "130")), list("100", versioned("a", "u1", "90")), true},
		{"versions that do not compare", cache(versioned("a", "u1", "x"), versioned("b", "u2", "y")), list("z", versioned("a", "u1", "w")), true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := caughtUp(tc.cached, tc.listed); got != tc.want {
				t.Errorf("caughtUp = %v, want %v", got, tc.want)
			}
		})
	}
}

// TestWaitCaughtUpHoldsUntilTheCacheCatchesUp: a cache that still holds a
// pod the API server deleted (a watch behind) holds a takeover until the
// delete reaches it. The cache follows one clientset, the API server's
// list comes from another.
func TestWaitCaughtUpHoldsUntilTheCacheCatchesUp(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	behind := fake.NewClientset(versioned("old", "u1", "5"))
	factory := informers.NewSharedInformerFactory(behind, 0)
	pods, err := NewPodsByNode(factory.Core().V1().Pods())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), factory.Core().V1().Pods().Informer().HasSynced) {
		t.Fatal("the pod informer never synced")
	}
	// The API server: node n has no pod any more, as of version 10.
	apiServer := fake.NewClientset()
	apiServer.PrependReactor("list", "pods", func(k8stesting.Action) (bool, runtime.Object, error) {
		return true, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: "10"}}, nil
	})

	done := make(chan error, 1)
	go func() { done <- pods.WaitCaughtUp(ctx, apiServer, "n") }()
	select {
	case err := <-done:
		t.Fatalf("WaitCaughtUp returned %v while the cache still held a deleted pod", err)
	case <-time.After(500 * time.Millisecond):
	}
	if err := behind.CoreV1().Pods("ns").Delete(ctx, "old", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("WaitCaughtUp did not return once the cache had caught up")
	}
	// A node whose cached pods are as listed is not waited on.
	if err := pods.WaitCaughtUp(ctx, apiServer, "other"); err != nil {
		t.Fatal(err)
	}
}
