package mock

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/utils/ptr"
)

// initSummary renders init container states as name=state(exit), in order.
func initSummary(p *corev1.Pod) string {
	var out []string
	for _, c := range p.Status.InitContainerStatuses {
		switch s := c.State; {
		case s.Running != nil:
			out = append(out, c.Name+"=running")
		case s.Terminated != nil:
			out = append(out, fmt.Sprintf("%s=exited(%d)", c.Name, s.Terminated.ExitCode))
		default:
			out = append(out, c.Name+"=waiting("+s.Waiting.Reason+")")
		}
	}
	return fmt.Sprint(out)
}

func withInit(pod *corev1.Pod) *corev1.Pod {
	pod.Spec.InitContainers = []corev1.Container{
		{Name: "migrate", Image: "busybox"},
		{Name: "proxy", Image: "envoy", RestartPolicy: ptr.To(corev1.ContainerRestartPolicyAlways)},
		{Name: "warm", Image: "busybox"},
	}
	return pod
}

func TestInitContainersRunInOrder(t *testing.T) {
	p, rec := newProvider(t)
	pod := withInit(testPod("init", map[string]string{
		AnnotationRunFor + ".migrate": "100ms", AnnotationRunFor + ".warm": "100ms",
		AnnotationRunFor + ".app": "200ms",
	}, corev1.RestartPolicyNever))
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	first := rec.last()
	if first.Status.Phase != corev1.PodPending || initSummary(first) != "[migrate=running proxy=waiting(PodInitializing) warm=waiting(PodInitializing)]" ||
		first.Status.ContainerStatuses[0].State.Waiting.Reason != "PodInitializing" {
		t.Fatalf("first init container not alone running: %s %s", first.Status.Phase, initSummary(first))
	}
	rec.waitFor(t, "sidecar started, then warm", func(p *corev1.Pod) bool {
		return initSummary(p) == "[migrate=exited(0) proxy=running warm=running]" && p.Status.Phase == corev1.PodPending
	})
	running := rec.waitFor(t, "app running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if initSummary(running) != "[migrate=exited(0) proxy=running warm=exited(0)]" {
		t.Errorf("init containers once the app runs: %s", initSummary(running))
	}
	done := rec.waitFor(t, "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if initSummary(done) != "[migrate=exited(0) proxy=exited(0) warm=exited(0)]" {
		t.Errorf("the sidecar must stop with the app: %s", initSummary(done))
	}
}

func TestFailedInitContainer(t *testing.T) {
	p, rec := newProvider(t)
	failing := map[string]string{AnnotationExitCode + ".migrate": "3", AnnotationRestartDelay: "50ms"}
	if err := p.CreatePod(context.Background(), withInit(testPod("never", failing, corev1.RestartPolicyNever))); err != nil {
		t.Fatal(err)
	}
	failed := rec.waitFor(t, "Failed", func(p *corev1.Pod) bool { return p.Name == "never" && p.Status.Phase == corev1.PodFailed })
	if initSummary(failed) != "[migrate=exited(3) proxy=waiting(PodInitializing) warm=waiting(PodInitializing)]" {
		t.Errorf("a failed init container stops the pod: %s", initSummary(failed))
	}

	if err := p.CreatePod(context.Background(), withInit(testPod("retry", failing, corev1.RestartPolicyAlways))); err != nil {
		t.Fatal(err)
	}
	retried := rec.waitFor(t, "restarted", func(p *corev1.Pod) bool {
		return p.Name == "retry" && len(p.Status.InitContainerStatuses) == 3 && p.Status.InitContainerStatuses[0].RestartCount >= 2
	})
	if retried.Status.Phase != corev1.PodPending || retried.Status.ContainerStatuses[0].State.Waiting == nil {
		t.Errorf("a retried init container keeps the pod Pending: %s %s", retried.Status.Phase, initSummary(retried))
	}
}
