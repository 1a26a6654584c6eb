package nodeutil

import (
	"context"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/cache"
)

// seen records the events one node's handler got, as "add p", "update p",
// "delete p".
type seen struct {
	mu     sync.Mutex
	events []string
}

func (s *seen) add(ev string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.events = append(s.events, ev)
}

func (s *seen) get() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := append([]string(nil), s.events...)
	sort.Strings(out)
	return out
}

func (s *seen) handler() cache.ResourceEventHandler {
	name := func(obj any) string {
		if tomb, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = tomb.Obj
		}
		return obj.(metav1.Object).GetName()
	}
	return cache.ResourceEventHandlerFuncs{
		AddFunc:    func(obj any) { s.add("add " + name(obj)) },
		UpdateFunc: func(_, obj any) { s.add("update " + name(obj)) },
		DeleteFunc: func(obj any) { s.add("delete " + name(obj)) },
	}
}

func pod(name, node string) *corev1.Pod {
	return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{"app": name}}, Spec: corev1.PodSpec{NodeName: node}}
}

func eventuallyEqual(t *testing.T, what string, got func() []string, want ...string) {
	t.Helper()
	var last []string
	err := wait.PollUntilContextTimeout(context.Background(), 10*time.Millisecond, 5*time.Second, true, func(context.Context) (bool, error) {
		last = got()
		if len(last) != len(want) {
			return false, nil
		}
		for i := range want {
			if last[i] != want[i] {
				return false, nil
			}
		}
		return true, nil
	})
	if err != nil {
		t.Fatalf("%s: got %v, want %v", what, last, want)
	}
}

// TestPodsByNodeDispatchesByNode: each node's handlers and lister see that
// node's pods only, whether the handler was added before the informer
// started or after (existing pods are replayed); a pod bound later is an
// add for its node; removing a handler stops its events.
func TestPodsByNodeDispatchesByNode(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	client := fake.NewClientset(pod("a1", "a"), pod("b1", "b"))
	factory := informers.NewSharedInformerFactory(client, 0)
	pods, err := NewPodsByNode(factory.Core().V1().Pods())
	if err != nil {
		t.Fatal(err)
	}
	var a, b seen
	regA, err := pods.For("a").Informer().AddEventHandler(a.handler())
	if err != nil {
		t.Fatal(err)
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), regA.HasSynced) {
		t.Fatal("node a's registration never synced")
	}
	// Added late: b1, already cached, is replayed.
	if _, err := pods.For("b").Informer().AddEventHandler(b.handler()); err != nil {
		t.Fatal(err)
	}
	eventuallyEqual(t, "node a's initial events", a.get, "add a1")
	eventuallyEqual(t, "node b's initial events", b.get, "add b1")

	pc := client.CoreV1().Pods("ns")
	if _, err := pc.Create(ctx, pod("a2", "a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	unbound, err := pc.Create(ctx, pod("b2", ""), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unbound.Spec.NodeName = "b" // the scheduler's binding
	if _, err := pc.Update(ctx, unbound, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := pc.Delete(ctx, "b1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyEqual(t, "node a's events", a.get, "add a1", "add a2")
	eventuallyEqual(t, "node b's events", b.get, "add b1", "add b2", "delete b1")

	for node, want := range map[string][]string{"a": {"a1", "a2"}, "b": {"b2"}} {
		lister := pods.For(node).Lister()
		list, err := lister.List(labels.Everything())
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, p := range list {
			names = append(names, p.Name)
		}
		sort.Strings(names)
		if len(names) != len(want) || names[0] != want[0] {
			t.Errorf("node %s lists %v, want %v", node, names, want)
		}
		if _, err := lister.Pods("ns").Get(want[0]); err != nil {
			t.Errorf("node %s: get %s: %v", node, want[0], err)
		}
		sel := labels.SelectorFromSet(labels.Set{"app": want[0]})
		if got, _ := lister.Pods("ns").List(sel); len(got) != 1 {
			t.Errorf("node %s: selector app=%s matched %d pods", node, want[0], len(got))
		}
	}
	if _, err := pods.For("a").Lister().Pods("ns").Get("b2"); !apierrors.IsNotFound(err) {
		t.Errorf("node a got node b's pod: %v", err)
	}

	if err := pods.For("a").Informer().RemoveEventHandler(regA); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Create(ctx, pod("a3", "a"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventuallyEqual(t, "node a's lister after a3", func() []string {
		l, _ := pods.For("a").Lister().List(labels.Everything())
		return []string{string(rune('0' + len(l)))}
	}, "3")
	if got := a.get(); len(got) != 2 {
		t.Errorf("a removed handler still got events: %v", got)
	}
}
