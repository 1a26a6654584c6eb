package nodeutil_test

import (
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"

	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

// recordingProvider tells which pods it was asked to create and delete,
// and lists the pods it was given at the start.
type recordingProvider struct {
	nopProvider
	start   []*corev1.Pod
	created chan string
	deleted chan string
}

func newRecordingProvider(start ...*corev1.Pod) *recordingProvider {
	return &recordingProvider{start: start, created: make(chan string, 10), deleted: make(chan string, 10)}
}

func (p *recordingProvider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	p.created <- pod.Name
	return nil
}

func (p *recordingProvider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p.deleted <- pod.Name
	return nil
}

func (p *recordingProvider) GetPods(context.Context) ([]*corev1.Pod, error) { return p.start, nil }

func startOnDemand(t *testing.T, client *fake.Clientset, p *recordingProvider) *nodeutil.Node {
	t.Helper()
	n, err := nodeutil.New(nodeutil.Config{
		Client:                client,
		Node:                  &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "vk5"}},
		Provider:              p,
		PodControllerOnDemand: true,
	})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(func() { cancel(); <-n.Done() })
	if err := n.Start(ctx); err != nil {
		t.Fatal(err)
	}
	return n
}

func received(t *testing.T, ch <-chan string, want string) {
	t.Helper()
	select {
	case got := <-ch:
		if got != want {
			t.Fatalf("got pod %s, want %s", got, want)
		}
	case <-time.After(10 * time.Second):
		t.Fatalf("pod %s not handed to the provider in 10s", want)
	}
}

// TestPodControllerOnDemandWaitsForTheFirstPod: an idle node is ready
// without a pod controller, and its first pod starts one that runs it.
func TestPodControllerOnDemandWaitsForTheFirstPod(t *testing.T) {
	client := fake.NewClientset()
	p := newRecordingProvider()
	n := startOnDemand(t, client, p)
	if pc := n.PodController(); pc != nil {
		t.Fatal("an idle node built its pod controller before any pod")
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "first", UID: "u1"},
		Spec:       corev1.PodSpec{NodeName: "vk5", Containers: []corev1.Container{{Name: "c", Image: "i"}}},
	}
	if _, err := client.CoreV1().Pods("default").Create(context.Background(), pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	received(t, p.created, "first")
	if n.PodController() == nil {
		t.Error("the pod ran but PodController is nil")
	}
}

// TestPodControllerOnDemandStartsForTheProvidersPods: pods the provider
// kept from before start the controller at once, which removes those
// Kubernetes no longer has.
func TestPodControllerOnDemandStartsForTheProvidersPods(t *testing.T) {
	left := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "left", UID: "u2"}}
	p := newRecordingProvider(left)
	n := startOnDemand(t, fake.NewClientset(), p)
	if n.PodController() == nil {
		t.Fatal("the provider has a pod but the node started without a pod controller")
	}
	received(t, p.deleted, "left")
}
