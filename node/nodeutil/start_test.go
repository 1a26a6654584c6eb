package nodeutil_test

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	k8sruntime "k8s.io/apimachinery/pkg/runtime"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	k8stesting "k8s.io/client-go/testing"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

// TestStartThatFailsHasStopped: a node that cannot start returns the
// error from Start with everything it started stopped: Done is closed,
// Err is that error, Ready never closes, and AfterStop's funcs run, those
// given before Start and after.
func TestStartThatFailsHasStopped(t *testing.T) {
	client := fake.NewClientset()
	refused := apierrors.NewForbidden(corev1.Resource("nodes"), "vk3", nil)
	client.PrependReactor("*", "nodes", func(k8stesting.Action) (bool, k8sruntime.Object, error) {
		return true, nil, refused
	})
	n, err := nodeutil.New(nodeutil.Config{
		Client:   client,
		Node:     &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk3"}},
		Provider: nopProvider{},
	})
	if err != nil {
		t.Fatal(err)
	}
	ran := make(chan string, 2)
	n.AfterStop(func() { ran <- "before" })
	err = n.Start(context.Background())
	if !apierrors.IsForbidden(err) {
		t.Fatalf("Start with the Node refused: %v, want the refusal", err)
	}
	select {
	case <-n.Done():
	default:
		t.Fatal("Start failed but Done is not closed")
	}
	if got := n.Err(); !apierrors.IsForbidden(got) {
		t.Errorf("Err after a failed Start: %v, want the refusal", got)
	}
	select {
	case <-n.Ready():
		t.Error("Ready closed for a node that did not start")
	default:
	}
	n.AfterStop(func() { ran <- "after" })
	got := map[string]bool{}
	for range 2 {
		select {
		case f := <-ran:
			got[f] = true
		case <-time.After(10 * time.Second):
			t.Fatalf("AfterStop funcs run: %v, want before and after", got)
		}
	}
}

// TestReadyNodesHoldNoGoroutine: nodes that share their informers, as the
// daemon's do, hold no goroutine each once ready, and each still stops,
// with AfterStop told, when its context ends.
func TestReadyNodesHoldNoGoroutine(t *testing.T) {
	const nodes = 40
	client := fake.NewClientset()
	factory := nodeutil.NewInformerFactory(client, 0)
	byNode, err := nodeutil.NewPodsByNode(factory.Core().V1().Pods())
	if err != nil {
		t.Fatal(err)
	}
	objects, err := nodeutil.NewObjectInformers(factory)
	if err != nil {
		t.Fatal(err)
	}
	// Nodes from a factory without a transform: the fake clientset's
	// watch hands out the objects it keeps, which a transform would change.
	nodeFactory := informers.NewSharedInformerFactory(client, 0)
	watch, err := nodeutil.NewNodeWatch(nodeFactory.Core().V1().Nodes())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	started := make([]*nodeutil.Node, nodes)
	for i := range started {
		name := fmt.Sprintf("vk%d", i)
		started[i], err = nodeutil.New(nodeutil.Config{
			Client:                 client,
			Node:                   &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name}},
			Provider:               nopProvider{},
			PodInformer:            byNode.For(name),
			InformerFactory:        factory,
			EventRecorder:          discardRecorder{},
			NodeOptions:            []node.NodeControllerOpt{node.WithNodeWatch(watch)},
			ConfigurePodController: objects.Configure,
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	factory.Start(ctx.Done())
	nodeFactory.Start(ctx.Done())
	// The first node starts the shared informers' goroutines.
	if err := started[0].Start(ctx); err != nil {
		t.Fatal(err)
	}
	before := runtime.NumGoroutine()
	for _, n := range started[1:] {
		if err := n.Start(ctx); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(5 * time.Second)
	held := runtime.NumGoroutine() - before
	for ; held >= nodes/2 && time.Now().Before(deadline); held = runtime.NumGoroutine() - before {
		time.Sleep(10 * time.Millisecond)
	}
	if held >= nodes/2 {
		t.Fatalf("%d goroutines more with %d more nodes ready; want none a node", held, nodes-1)
	}

	stopped := make(chan struct{}, nodes)
	for _, n := range started {
		n.AfterStop(func() { stopped <- struct{}{} })
	}
	cancel()
	factory.Shutdown()
	nodeFactory.Shutdown()
	for i := range nodes {
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			t.Fatalf("%d of %d nodes stopped after their context ended", i, nodes)
		}
	}
	for _, n := range started {
		if err := n.Err(); err != nil {
			t.Errorf("Err after the context ended: %v, want nil", err)
		}
	}
}

// discardRecorder records nothing: nodes built with it start no event
// broadcaster of their own.
type discardRecorder struct{}

func (discardRecorder) Event(k8sruntime.Object, string, string, string)          {}
func (discardRecorder) Eventf(k8sruntime.Object, string, string, string, ...any) {}
func (discardRecorder) AnnotatedEventf(k8sruntime.Object, map[string]string, string, string, string, ...any) {
}
