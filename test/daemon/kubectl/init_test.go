//go:build e2e

package kubectl_test

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestInitContainersThroughKubectl: kubectl shows init containers running
// in order (Init:0/2, Init:1/2, then Running), a failed one (Init:Error),
// and a sidecar counted among the ready containers; the conditions are the
// controller's, computed as a kubelet does.
func TestInitContainersThroughKubectl(t *testing.T) {
	daemontest.ForEachTransport(t, testInitContainersThroughKubectl)
}

func testInitContainersThroughKubectl(t *testing.T, via daemontest.Transport) {
	c, ns, d := via.ReadyNode(t, true)
	ctx := context.Background()

	newPod := func(name string, policy corev1.RestartPolicy, annotations map[string]string, init ...corev1.Container) {
		t.Helper()
		pod := &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
			Spec: corev1.PodSpec{
				NodeName: d.Name, Tolerations: daemontest.Tolerate, RestartPolicy: policy, InitContainers: init,
				Containers: []corev1.Container{{Name: "app", Image: "nginx"}},
			},
		}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// What kubectl get pods prints, every line: polling could miss a
	// status the API server held for less than a poll.
	printed := daemontest.WatchPodColumns(t, c, ns)

	// seed runs long enough that its Init:1/2 is written on its own, not
	// folded into the next status write by a slow API server.
	newPod("ordered", corev1.RestartPolicyAlways, map[string]string{
		mock.AnnotationRunFor + ".migrate": "3s", mock.AnnotationRunFor + ".seed": "5s",
	}, corev1.Container{Name: "migrate", Image: "busybox"}, corev1.Container{Name: "seed", Image: "busybox"})
	printed.WaitFor(t, "ordered", "0/1 Init:0/2", "0/1 Init:1/2", "1/1 Running")
	p, err := c.Client.CoreV1().Pods(ns).Get(ctx, "ordered", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	first, second := p.Status.InitContainerStatuses[0].State.Terminated, p.Status.InitContainerStatuses[1].State.Terminated
	if first == nil || second == nil || second.StartedAt.Before(&first.FinishedAt) {
		t.Errorf("init containers did not run one after the other: %+v", p.Status.InitContainerStatuses)
	}
	conds := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range p.Status.Conditions {
		conds[c.Type] = c.Status
	}
	for _, typ := range []corev1.PodConditionType{corev1.PodReadyToStartContainers, corev1.PodInitialized, corev1.ContainersReady, corev1.PodReady} {
		if conds[typ] != corev1.ConditionTrue {
			t.Errorf("condition %s is %q", typ, conds[typ])
		}
	}

	newPod("failing", corev1.RestartPolicyNever, map[string]string{mock.AnnotationExitCode + ".migrate": "2"},
		corev1.Container{Name: "migrate", Image: "busybox"})
	printed.WaitFor(t, "failing", "0/1 Init:Error")
	daemontest.WaitPod(t, c.Client, ns, "failing", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })

	newPod("sidecar", corev1.RestartPolicyAlways, nil,
		corev1.Container{Name: "proxy", Image: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)})
	printed.WaitFor(t, "sidecar", "2/2 Running")
	if out := daemontest.Kubectl(t, c, "-n", ns, "exec", "sidecar", "-c", "proxy", "--", "hostname"); out != "sidecar\n" {
		t.Errorf("exec into the sidecar: %q", out)
	}
}
