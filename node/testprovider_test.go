package node_test

import (
	"context"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// testProvider is an in-memory PodLifecycleHandler for the controller tests:
// pods start Running at once, stop on DeletePod, and every call is counted.
type testProvider struct {
	mu     sync.Mutex
	pods   map[string]*corev1.Pod
	calls  map[string]int
	notify func(*corev1.Pod)
	// onDelete, if set, runs at the start of DeletePod.
	onDelete func(*corev1.Pod)
	// holdTerminal makes DeletePod keep the pod running, as a backend that
	// has not stopped it yet (or never will): no terminal status unless the
	// test reports it with finish.
	holdTerminal bool
}

func newTestProvider() *testProvider {
	return &testProvider{pods: map[string]*corev1.Pod{}, calls: map[string]int{}}
}

func key(ns, name string) string { return ns + "/" + name }

func (p *testProvider) count(op string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[op]
}

func (p *testProvider) pod(ns, name string) *corev1.Pod {
	p.mu.Lock()
	defer p.mu.Unlock()
	if pod := p.pods[key(ns, name)]; pod != nil {
		return pod.DeepCopy()
	}
	return nil
}

func runningStatus(pod *corev1.Pod) corev1.PodStatus {
	now := metav1.Now()
	s := corev1.PodStatus{
		Phase:     corev1.PodRunning,
		HostIP:    "10.213.0.2",
		PodIP:     "10.100.0.1",
		StartTime: &now,
		Conditions: []corev1.PodCondition{
			{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: now},
		},
	}
	for _, c := range pod.Spec.Containers {
		s.ContainerStatuses = append(s.ContainerStatuses, corev1.ContainerStatus{
			Name: c.Name, Image: c.Image, Ready: true, Started: ptr.To(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: now}},
		})
	}
	return s
}

// terminate moves every container to terminated with exitCode.
func terminate(pod *corev1.Pod, exitCode int32) {
	now := metav1.Now()
	pod.Status.Phase = corev1.PodSucceeded
	if exitCode != 0 {
		pod.Status.Phase = corev1.PodFailed
	}
	for i := range pod.Status.ContainerStatuses {
		c := &pod.Status.ContainerStatuses[i]
		c.Ready = false
		c.State = corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: exitCode, Reason: "Completed", FinishedAt: now}}
	}
	for i := range pod.Status.Conditions {
		pod.Status.Conditions[i].Status = corev1.ConditionFalse
	}
}

func (p *testProvider) CreatePod(_ context.Context, pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	pod.Status = runningStatus(pod)
	p.mu.Lock()
	p.calls["CreatePod"]++
	p.pods[key(pod.Namespace, pod.Name)] = pod
	notify := p.notify
	p.mu.Unlock()
	if notify != nil {
		notify(pod.DeepCopy())
	}
	return nil
}

func (p *testProvider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["UpdatePod"]++
	old := p.pods[key(pod.Namespace, pod.Name)]
	if old == nil {
		return errdefs.NotFoundf("pod %s/%s", pod.Namespace, pod.Name)
	}
	updated := pod.DeepCopy()
	updated.Status = old.Status
	p.pods[key(pod.Namespace, pod.Name)] = updated
	return nil
}

func (p *testProvider) DeletePod(_ context.Context, pod *corev1.Pod) error {
	if p.onDelete != nil {
		p.onDelete(pod)
	}
	p.mu.Lock()
	p.calls["DeletePod"]++
	k := key(pod.Namespace, pod.Name)
	existing := p.pods[k]
	if existing == nil {
		p.mu.Unlock()
		return errdefs.NotFoundf("pod %s", k)
	}
	hold, notify := p.holdTerminal, p.notify
	if !hold {
		delete(p.pods, k)
	}
	p.mu.Unlock()
	if !hold && notify != nil {
		terminate(existing, 0)
		notify(existing)
	}
	return nil
}

// finish reports pod as terminated with exitCode, whether or not the
// provider still has it.
func (p *testProvider) finish(pod *corev1.Pod, exitCode int32) {
	pod = pod.DeepCopy()
	terminate(pod, exitCode)
	p.mu.Lock()
	if _, ok := p.pods[key(pod.Namespace, pod.Name)]; ok {
		p.pods[key(pod.Namespace, pod.Name)] = pod
	}
	notify := p.notify
	p.mu.Unlock()
	if notify != nil {
		notify(pod.DeepCopy())
	}
}

// lose drops a pod without a word, as a backend that crashed would.
func (p *testProvider) lose(ns, name string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.pods, key(ns, name))
}

// GetPod counts its calls per pod, as "GetPod ns/name".
func (p *testProvider) GetPod(_ context.Context, ns, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	p.calls["GetPod "+key(ns, name)]++
	p.mu.Unlock()
	if pod := p.pod(ns, name); pod != nil {
		return pod, nil
	}
	return nil, errdefs.NotFoundf("pod %s", key(ns, name))
}

func (p *testProvider) GetPodStatus(_ context.Context, ns, name string) (*corev1.PodStatus, error) {
	p.mu.Lock()
	p.calls["GetPodStatus"]++
	p.mu.Unlock()
	if pod := p.pod(ns, name); pod != nil {
		return &pod.Status, nil
	}
	return nil, errdefs.NotFoundf("pod %s", key(ns, name))
}

func (p *testProvider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.calls["GetPods"]++
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, pod := range p.pods {
		out = append(out, pod.DeepCopy())
	}
	return out, nil
}

// notifyingProvider adds PodNotifier to testProvider.
type notifyingProvider struct{ *testProvider }

func (p notifyingProvider) NotifyPods(_ context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notify = f
}
