package node

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// countingProvider counts pings and can report a node.
type countingProvider struct {
	NaiveNodeProvider
	pings  atomic.Int32
	notify func(*corev1.Node)
	ready  chan struct{}
}

func (p *countingProvider) Ping(context.Context) error {
	p.pings.Add(1)
	return nil
}

func (p *countingProvider) NotifyNodeStatus(_ context.Context, cb func(*corev1.Node)) {
	p.notify = cb
	close(p.ready)
}

// controllerGoroutines are the goroutines running code of a NodeController.
func controllerGoroutines() int {
	buf := make([]byte, 1<<20)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "node.(*NodeController)") {
			n++
		}
	}
	return n
}

// TestNodeControllerIdleHasNoGoroutine: between its pings, renewals and
// writes, a running node controller holds no goroutine; it still pings
// on time, writes what the provider reports, and stops when ctx ends.
func TestNodeControllerIdleHasNoGoroutine(t *testing.T) {
	client := fake.NewClientset()
	p := &countingProvider{ready: make(chan struct{})}
	n, err := NewNodeController(p, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk"}}, client.CoreV1().Nodes(),
		WithNodeEnableLeaseV1WithRenewInterval(client.CoordinationV1().Leases(corev1.NamespaceNodeLease), 7200, time.Hour),
		WithNodePingInterval(20*time.Millisecond), WithNodeWatch(watchFunc(func(string, func(*corev1.Node)) func() { return func() {} })))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	if err := n.Start(ctx); err == nil {
		t.Error("a second Start succeeded")
	}
	select {
	case <-n.Ready():
	case <-n.Done():
		t.Fatalf("the node controller stopped: %v", n.Err())
	case <-time.After(10 * time.Second):
		t.Fatal("the node controller is not ready")
	}
	poll.Until(t, 10*time.Second, "pings, and no goroutine between them", func() (bool, string) {
		pings, held := p.pings.Load(), controllerGoroutines()
		return pings >= 5 && held == 0, fmt.Sprintf("%d pings, %d goroutines in the controller", pings, held)
	})

	// What the provider reports is written.
	<-p.ready
	reported := n.Node().DeepCopy()
	reported.Status.Conditions = []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}
	p.notify(reported)
	poll.Until(t, 10*time.Second, "the reported condition in the API server", func() (bool, string) {
		got, err := client.CoreV1().Nodes().Get(ctx, "vk", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return len(got.Status.Conditions) == 1 && got.Status.Conditions[0].Type == corev1.NodeReady,
			fmt.Sprintf("conditions %v", got.Status.Conditions)
	})

	cancel()
	select {
	case <-n.Done():
	case <-time.After(10 * time.Second):
		t.Fatal("the node controller did not stop after ctx ended")
	}
	if err := n.Err(); err != nil {
		t.Errorf("Err after ctx ended: %v", err)
	}
	before := p.pings.Load()
	time.Sleep(100 * time.Millisecond)
	if after := p.pings.Load(); after != before {
		t.Errorf("%d pings after the controller stopped", after-before)
	}
}

// TestNodeControllerStopsOnItsError: an existing Node deleted from the API
// server ends the controller with ErrNodeDeleted, through Run, whether it
// learns that from a shared NodeWatch or from its own watch, which is
// stopped and waited for.
func TestNodeControllerStopsOnItsError(t *testing.T) {
	for _, shared := range []bool{true, false} {
		t.Run(fmt.Sprintf("shared watch %v", shared), func(t *testing.T) {
			existing := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk", UID: "u"}}
			client := fake.NewClientset(existing)
			opts := []NodeControllerOpt{WithExistingNode()}
			var observed func(*corev1.Node)
			subscribed := make(chan struct{})
			if shared {
				opts = append(opts, WithNodeWatch(watchFunc(func(_ string, f func(*corev1.Node)) func() {
					observed = f
					close(subscribed)
					return func() {}
				})))
			}
			n, err := NewNodeController(NaiveNodeProvider{}, existing, client.CoreV1().Nodes(), opts...)
			if err != nil {
				t.Fatal(err)
			}
			done := make(chan error, 1)
			go func() { done <- n.Run(context.Background()) }()
			<-n.Ready()
			if shared {
				<-subscribed
				observed(nil)
			} else {
				// What the controller's own watch calls on a delete, once
				// the watch runs.
				poll.Until(t, 10*time.Second, "the controller's watch on its Node", func() (bool, string) {
					for _, a := range client.Actions() {
						if a.GetVerb() == "watch" && a.GetResource().Resource == "nodes" {
							return true, ""
						}
					}
					return false, "no watch yet"
				})
				n.observed(nil)
			}
			select {
			case err := <-done:
				if !errors.Is(err, ErrNodeDeleted) {
					t.Errorf("Run = %v, want ErrNodeDeleted", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("Run did not return after its Node was deleted")
			}
			if !errors.Is(n.Err(), ErrNodeDeleted) {
				t.Errorf("Err = %v, want ErrNodeDeleted", n.Err())
			}
		})
	}
}

// watchFunc is a NodeWatch made of a function.
type watchFunc func(string, func(*corev1.Node)) func()

func (f watchFunc) Subscribe(name string, observed func(*corev1.Node)) func() {
	return f(name, observed)
}
