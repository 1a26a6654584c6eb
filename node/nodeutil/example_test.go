package nodeutil_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

// nopProvider runs nothing; enough to bring a node up.
type nopProvider struct{}

func (nopProvider) CreatePod(context.Context, *corev1.Pod) error                { return nil }
func (nopProvider) UpdatePod(context.Context, *corev1.Pod) error                { return nil }
func (nopProvider) DeletePod(context.Context, *corev1.Pod) error                { return nil }
func (nopProvider) GetPod(context.Context, string, string) (*corev1.Pod, error) { return nil, nil }
func (nopProvider) GetPodStatus(context.Context, string, string) (*corev1.PodStatus, error) {
	return nil, nil
}
func (nopProvider) GetPods(context.Context) ([]*corev1.Pod, error) { return nil, nil }

func ExampleNew() {
	client := fake.NewClientset()
	n, err := nodeutil.New(nodeutil.Config{
		Client:   client,
		Node:     &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk0"}},
		Provider: nopProvider{},
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go n.Run(ctx) //nolint:errcheck
	<-n.Ready()
	_, err = client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "vk0", metav1.GetOptions{})
	fmt.Println("node ready, lease:", err == nil)
	cancel()
	<-n.Done()
	fmt.Println("stopped:", n.Err())
	// Output:
	// node ready, lease: true
	// stopped: <nil>
}

// Start returns once the node is up, and AfterStop follows it without a
// goroutine waiting, so that a process with many nodes keeps no goroutine
// blocked in each.
func ExampleNode_Start() {
	client := fake.NewClientset()
	n, err := nodeutil.New(nodeutil.Config{
		Client:   client,
		Node:     &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk2"}},
		Provider: nopProvider{},
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	n.AfterStop(func() {
		fmt.Println("stopped:", n.Err())
		close(stopped)
	})
	if err := n.Start(ctx); err != nil {
		panic(err)
	}
	select {
	case <-n.Ready():
		fmt.Println("ready when Start returns")
	default:
		fmt.Println("not ready")
	}
	cancel()
	<-stopped
	// Output:
	// ready when Start returns
	// stopped: <nil>
}

func ExampleNewNode() {
	client := fake.NewClientset()
	n, err := nodeutil.NewNode("vk1", func(cfg nodeutil.ProviderConfig) (nodeutil.Provider, node.NodeProvider, error) {
		// The provider gets listers of the node's informers and its spec,
		// which it may fill in before the node is registered.
		fmt.Println("provider built for", cfg.Node.Name)
		return fullProvider{}, nil, nil
	}, nodeutil.WithClient(client))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go n.Run(ctx) //nolint:errcheck
	err = n.WaitReady(ctx, time.Minute)
	fmt.Println("ready:", err == nil)
	cancel()
	<-n.Done()
	// Output:
	// provider built for vk1
	// ready: true
}
