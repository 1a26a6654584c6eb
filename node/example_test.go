package node_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/node"
)

// A node controller registers the node, keeps its lease fresh and writes the
// status its NodeProvider reports.
func ExampleNewNodeController() {
	client := fake.NewClientset()
	spec := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk0"}}
	nc, err := node.NewNodeController(node.NaiveNodeProvider{}, spec, client.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(client.CoordinationV1().Leases(corev1.NamespaceNodeLease), 0))
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go nc.Run(ctx) //nolint:errcheck
	<-nc.Ready()

	n, _ := client.CoreV1().Nodes().Get(ctx, "vk0", metav1.GetOptions{})
	lease, _ := client.CoordinationV1().Leases(corev1.NamespaceNodeLease).Get(ctx, "vk0", metav1.GetOptions{})
	fmt.Println("registered", n.Name, "lease held by", *lease.Spec.HolderIdentity, "for", *lease.Spec.LeaseDurationSeconds, "seconds")

	cancel()
	<-nc.Done()
	fmt.Println("stopped, err:", nc.Err())
	// Output:
	// registered vk0 lease held by vk0 for 40 seconds
	// stopped, err: <nil>
}

// The lease options conflict with each other.
func ExampleNewNodeController_conflictingLeases() {
	client := fake.NewClientset()
	leases := client.CoordinationV1().Leases(corev1.NamespaceNodeLease)
	_, err := node.NewNodeController(node.NaiveNodeProvider{}, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk0"}}, client.CoreV1().Nodes(),
		node.WithNodeEnableLeaseV1(leases, 40),
		node.WithNodeEnableLeaseV1WithRenewInterval(leases, 40, 5*time.Second))
	fmt.Println(err == node.ErrConflictingLeaseControllerConfiguration)
	// Output: true
}

// echoProvider runs every pod at once and reports it Running.
type echoProvider struct {
	notify func(*corev1.Pod)
}

func (p *echoProvider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	fmt.Printf("create %s/%s with %s=%s\n", pod.Namespace, pod.Name, pod.Spec.Containers[0].Env[0].Name, pod.Spec.Containers[0].Env[0].Value)
	pod = pod.DeepCopy()
	pod.Status.Phase = corev1.PodRunning
	p.notify(pod)
	return nil
}
func (p *echoProvider) UpdatePod(context.Context, *corev1.Pod) error { return nil }
func (p *echoProvider) DeletePod(context.Context, *corev1.Pod) error { return nil }
func (p *echoProvider) GetPod(context.Context, string, string) (*corev1.Pod, error) {
	return nil, nil
}
func (p *echoProvider) GetPodStatus(context.Context, string, string) (*corev1.PodStatus, error) {
	return nil, nil
}
func (p *echoProvider) GetPods(context.Context) ([]*corev1.Pod, error)    { return nil, nil }
func (p *echoProvider) NotifyPods(_ context.Context, f func(*corev1.Pod)) { p.notify = f }

// A pod controller hands the pods bound to the node to the provider, with
// their environment resolved, and writes the status the provider reports.
func ExampleNewPodController() {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"},
		Spec: corev1.PodSpec{NodeName: "vk0", Containers: []corev1.Container{{
			Name: "app",
			Env: []corev1.EnvVar{{Name: "POD", ValueFrom: &corev1.EnvVarSource{
				FieldRef: &corev1.ObjectFieldSelector{FieldPath: "metadata.name"}}}},
		}}},
	}
	client := fake.NewClientset(pod)
	factory := informers.NewSharedInformerFactory(client, 0)

	pc, err := node.NewPodController(node.PodControllerConfig{
		PodClient:     client.CoreV1(),
		PodInformer:   factory.Core().V1().Pods(),
		EventRecorder: record.NewFakeRecorder(10),
		Provider:      &echoProvider{},
	})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	go pc.Run(ctx, 1) //nolint:errcheck
	factory.Start(ctx.Done())
	<-pc.Ready()

	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		p, err := client.CoreV1().Pods("default").Get(ctx, "hello", metav1.GetOptions{})
		return err == nil && p.Status.Phase == corev1.PodRunning, nil
	})
	fmt.Println("status written: Running")
	cancel()
	<-pc.Done()
	factory.Shutdown()
	// Output:
	// create default/hello with POD=hello
	// status written: Running
}

// NewNaiveNodeProvider gives a NodeProvider that can push status updates.
func ExampleNewNaiveNodeProvider() {
	client := fake.NewClientset()
	np := node.NewNaiveNodeProvider()
	nc, _ := node.NewNodeController(np, &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk0"}}, client.CoreV1().Nodes())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go nc.Run(ctx) //nolint:errcheck
	<-nc.Ready()

	update := &corev1.Node{Status: corev1.NodeStatus{Conditions: []corev1.NodeCondition{
		{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "ProviderReady"},
	}}}
	if err := np.UpdateStatus(ctx, update); err != nil {
		panic(err)
	}
	_ = wait.PollUntilContextTimeout(ctx, 10*time.Millisecond, 10*time.Second, true, func(ctx context.Context) (bool, error) {
		n, err := client.CoreV1().Nodes().Get(ctx, "vk0", metav1.GetOptions{})
		return err == nil && len(n.Status.Conditions) == 1, nil
	})
	n, _ := client.CoreV1().Nodes().Get(ctx, "vk0", metav1.GetOptions{})
	fmt.Println(n.Status.Conditions[0].Type, n.Status.Conditions[0].Reason)
	// Output: Ready ProviderReady
}
