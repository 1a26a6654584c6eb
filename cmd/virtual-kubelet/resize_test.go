package main_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// ResizePod is a Burstable pod whose container c requests 100m CPU (limit
// 200m) and 64Mi of memory, resized in place without a restart for CPU and
// with one for memory.
func ResizePod(name, node string, annotations map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName: node, Tolerations: Tolerate,
			Containers: []corev1.Container{{
				Name: "c", Image: "busybox",
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
				},
				ResizePolicy: []corev1.ContainerResizePolicy{
					{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.NotRequired},
					{ResourceName: corev1.ResourceMemory, RestartPolicy: corev1.RestartContainer},
				},
			}},
		},
	}
}

// CPUResize is the resize of the issue: c to 150m CPU, limit 300m.
const CPUResize = `{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m"}}}]}}`

// ResizeCondition returns the pod's condition of type t, nil if none.
func ResizeCondition(p *corev1.Pod, t corev1.PodConditionType) *corev1.PodCondition {
	for i := range p.Status.Conditions {
		if p.Status.Conditions[i].Type == t {
			return &p.Status.Conditions[i]
		}
	}
	return nil
}

// RunsWith reports whether the pod's container c reports the CPU request
// and limit given as running and allocated.
func RunsWith(p *corev1.Pod, request, limit string) bool {
	if len(p.Status.ContainerStatuses) != 1 {
		return false
	}
	cs := p.Status.ContainerStatuses[0]
	return cs.Resources != nil && cs.Resources.Requests.Cpu().Equal(resource.MustParse(request)) &&
		cs.Resources.Limits.Cpu().Equal(resource.MustParse(limit)) &&
		cs.AllocatedResources.Cpu().Equal(resource.MustParse(request))
}

func DescribeResize(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "generation=%d observed=%d", p.Generation, p.Status.ObservedGeneration)
	for _, cs := range p.Status.ContainerStatuses {
		fmt.Fprintf(&b, " %s: restarts=%d resources=%v allocated=%v", cs.Name, cs.RestartCount, cs.Resources, cs.AllocatedResources)
	}
	for _, c := range p.Status.Conditions {
		if c.Type == corev1.PodResizePending || c.Type == corev1.PodResizeInProgress {
			fmt.Fprintf(&b, " %s(%s: %s, generation %d)", c.Type, c.Reason, c.Message, c.ObservedGeneration)
		}
	}
	return b.String()
}

// TestInPlacePodResize: `kubectl patch --subresource resize` of a pod on
// the virtual node is accepted, and goes as on a kubelet: the new
// resources show in containerStatuses[].resources once applied, with
// PodResizeInProgress while the mock applies them (scripted to take 2s);
// a RestartContainer policy restarts the container; a resize the mock
// refuses is PodResizePending/Infeasible, one it defers
// PodResizePending/Deferred until it lets it through. Pod-level resources
// (beta, on in 1.36) are resized likewise.
func TestInPlacePodResize(t *testing.T) { ForEachTransport(t, testInPlacePodResize) }

func testInPlacePodResize(t *testing.T, via Transport) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	d := via.Start(t, c, nil)
	WaitNodeReady(t, c.Client, d.Name)

	podLevel := ResizePod("pod-level", d.Name, nil)
	podLevel.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	podLevel.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	CreatePods(t, c.Client, ns, podLevel,
		ResizePod("slow", d.Name, map[string]string{mock.AnnotationResizeDelay: "2s"}),
		ResizePod("refused", d.Name, map[string]string{mock.AnnotationResize: "refuse"}),
		ResizePod("deferred", d.Name, map[string]string{mock.AnnotationResize: "defer"}),
	)
	for _, name := range []string{"slow", "refused", "deferred"} {
		WaitPod(t, c.Client, ns, name, "Running with its resources reported", func(p *corev1.Pod) bool {
			return Running(p) && RunsWith(p, "100m", "200m") && p.Status.ObservedGeneration == p.Generation
		})
	}

	t.Run("pod-level", func(t *testing.T) {
		WaitPod(t, c.Client, ns, "pod-level", "Running with its pod-level resources reported", func(p *corev1.Pod) bool {
			return Running(p) && podRunsWith(p, "100m", "200m")
		})
		Kubectl(t, c, "-n", ns, "patch", "pod", "pod-level", "--subresource", "resize", "-p",
			`{"spec":{"resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m"}}}}`)
		WaitPod(t, c.Client, ns, "pod-level", "resized", func(p *corev1.Pod) bool {
			return podRunsWith(p, "150m", "300m") && p.Status.ObservedGeneration == p.Generation &&
				ResizeCondition(p, corev1.PodResizePending) == nil && ResizeCondition(p, corev1.PodResizeInProgress) == nil
		})
	})

	t.Run("applied", func(t *testing.T) {
		ResizeThroughProgress(t, c, ns, "slow")
		pod := WaitPod(t, c.Client, ns, "slow", "running with the new resources", func(p *corev1.Pod) bool {
			return RunsWith(p, "150m", "300m") && p.Status.ObservedGeneration == p.Generation
		})
		if n := pod.Status.ContainerStatuses[0].RestartCount; n != 0 {
			t.Errorf("a CPU resize (NotRequired) restarted the container %d times", n)
		}
		if ResizeCondition(pod, corev1.PodResizePending) != nil {
			t.Errorf("PodResizePending after the resize: %s", DescribeResize(pod))
		}
	})

	t.Run("RestartContainer", func(t *testing.T) {
		Kubectl(t, c, "-n", ns, "patch", "pod", "slow", "--subresource", "resize", "-p",
			`{"spec":{"containers":[{"name":"c","resources":{"requests":{"memory":"128Mi"},"limits":{"memory":"128Mi"}}}]}}`)
		WaitPod(t, c.Client, ns, "slow", "restarted with 128Mi", func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].State.Running != nil && cs[0].Resources != nil &&
				cs[0].Resources.Limits.Memory().Equal(resource.MustParse("128Mi")) &&
				ResizeCondition(p, corev1.PodResizeInProgress) == nil
		})
	})

	t.Run("infeasible", func(t *testing.T) {
		Kubectl(t, c, "-n", ns, "patch", "pod", "refused", "--subresource", "resize", "-p", CPUResize)
		pod := WaitPod(t, c.Client, ns, "refused", "PodResizePending/Infeasible", func(p *corev1.Pod) bool {
			cond := ResizeCondition(p, corev1.PodResizePending)
			return cond != nil && cond.Reason == corev1.PodReasonInfeasible && cond.ObservedGeneration == p.Generation
		})
		if cond := ResizeCondition(pod, corev1.PodResizePending); !strings.Contains(cond.Message, "refuse") {
			t.Errorf("Infeasible message %q does not say why", cond.Message)
		}
		if !RunsWith(pod, "100m", "200m") {
			t.Errorf("an infeasible resize changed the reported resources: %s", DescribeResize(pod))
		}
	})

	t.Run("deferred", func(t *testing.T) {
		Kubectl(t, c, "-n", ns, "patch", "pod", "deferred", "--subresource", "resize", "-p", CPUResize)
		WaitPod(t, c.Client, ns, "deferred", "PodResizePending/Deferred", func(p *corev1.Pod) bool {
			cond := ResizeCondition(p, corev1.PodResizePending)
			return cond != nil && cond.Reason == corev1.PodReasonDeferred && RunsWith(p, "100m", "200m")
		})
		// The mock lets it through: the deferred resize is made.
		Kubectl(t, c, "-n", ns, "annotate", "--overwrite", "pod", "deferred", mock.AnnotationResize+"=apply")
		pod := WaitPod(t, c.Client, ns, "deferred", "resized", func(p *corev1.Pod) bool {
			return RunsWith(p, "150m", "300m") && ResizeCondition(p, corev1.PodResizePending) == nil
		})
		if ResizeCondition(pod, corev1.PodResizeInProgress) != nil {
			t.Errorf("PodResizeInProgress after the resize: %s", DescribeResize(pod))
		}
	})
}

// ResizeThroughProgress resizes the pod name in place by CPUResize and
// waits for its PodResizeInProgress condition to come and go, the new CPU
// not reported while it is there.
func ResizeThroughProgress(t *testing.T, c *testcluster.Cluster, ns, name string) {
	t.Helper()
	w, err := c.Client.CoreV1().Pods(ns).Watch(context.Background(), metav1.ListOptions{FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	Kubectl(t, c, "-n", ns, "patch", "pod", name, "--subresource", "resize", "-p", CPUResize)
	// The condition comes while the mock applies the resize, and goes.
	var inProgress *corev1.PodCondition
	deadline := time.After(Timeout)
	for done := false; !done; {
		select {
		case ev, ok := <-w.ResultChan():
			if !ok {
				t.Fatal("watch closed")
			}
			p, isPod := ev.Object.(*corev1.Pod)
			if ev.Type != watch.Modified || !isPod {
				continue
			}
			if cond := ResizeCondition(p, corev1.PodResizeInProgress); cond != nil {
				inProgress = cond
				if RunsWith(p, "150m", "300m") {
					t.Errorf("PodResizeInProgress while the new resources are reported: %s", DescribeResize(p))
				}
			}
			done = inProgress != nil && ResizeCondition(p, corev1.PodResizeInProgress) == nil
		case <-deadline:
			t.Fatalf("PodResizeInProgress did not come and go (seen: %v)", inProgress)
		}
	}
	if inProgress.Status != corev1.ConditionTrue || inProgress.ObservedGeneration < 2 {
		t.Errorf("PodResizeInProgress: %+v", inProgress)
	}
}

// podRunsWith reports whether the pod reports the pod-level CPU request
// and limit given as running and allocated.
func podRunsWith(p *corev1.Pod, request, limit string) bool {
	r := p.Status.Resources
	return r != nil && r.Requests.Cpu().Equal(resource.MustParse(request)) && r.Limits.Cpu().Equal(resource.MustParse(limit)) &&
		p.Status.AllocatedResources.Cpu().Equal(resource.MustParse(request))
}
