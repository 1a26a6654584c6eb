//go:build e2e

package pods_test

import (
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestInPlacePodResize: `kubectl patch --subresource resize` of a pod on
// the virtual node is accepted, and goes as on a kubelet: the new
// resources show in containerStatuses[].resources once applied, with
// PodResizeInProgress while the mock applies them (scripted to take 2s);
// a RestartContainer policy restarts the container; a resize the mock
// refuses is PodResizePending/Infeasible, one it defers
// PodResizePending/Deferred until it lets it through. Pod-level resources
// (beta, on in 1.36) are resized likewise.
func TestInPlacePodResize(t *testing.T) { daemontest.ForEachTransport(t, testInPlacePodResize) }

func testInPlacePodResize(t *testing.T, via daemontest.Transport) {
	c, ns, d := via.ReadyNode(t, false)

	podLevel := daemontest.ResizePod("pod-level", d.Name, nil)
	podLevel.Spec.Containers[0].Resources = corev1.ResourceRequirements{}
	podLevel.Spec.Resources = &corev1.ResourceRequirements{
		Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
		Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("200m"), corev1.ResourceMemory: resource.MustParse("64Mi")},
	}
	daemontest.CreatePods(t, c.Client, ns, podLevel,
		daemontest.ResizePod("slow", d.Name, map[string]string{mock.AnnotationResizeDelay: "2s"}),
		daemontest.ResizePod("refused", d.Name, map[string]string{mock.AnnotationResize: "refuse"}),
		daemontest.ResizePod("deferred", d.Name, map[string]string{mock.AnnotationResize: "defer"}),
	)
	for _, name := range []string{"slow", "refused", "deferred"} {
		daemontest.WaitPod(t, c.Client, ns, name, "Running with its resources reported", func(p *corev1.Pod) bool {
			return daemontest.Running(p) && daemontest.RunsWith(p, "100m", "200m") && p.Status.ObservedGeneration == p.Generation
		})
	}

	t.Run("pod-level", func(t *testing.T) {
		daemontest.WaitPod(t, c.Client, ns, "pod-level", "Running with its pod-level resources reported", func(p *corev1.Pod) bool {
			return daemontest.Running(p) && podRunsWith(p, "100m", "200m")
		})
		daemontest.Kubectl(t, c, "-n", ns, "patch", "pod", "pod-level", "--subresource", "resize", "-p",
			`{"spec":{"resources":{"requests":{"cpu":"150m"},"limits":{"cpu":"300m"}}}}`)
		daemontest.WaitPod(t, c.Client, ns, "pod-level", "resized", func(p *corev1.Pod) bool {
			return podRunsWith(p, "150m", "300m") && p.Status.ObservedGeneration == p.Generation &&
				daemontest.ResizeCondition(p, corev1.PodResizePending) == nil && daemontest.ResizeCondition(p, corev1.PodResizeInProgress) == nil
		})
	})

	t.Run("applied", func(t *testing.T) {
		daemontest.ResizeThroughProgress(t, c, ns, "slow")
		pod := daemontest.WaitPod(t, c.Client, ns, "slow", "running with the new resources", func(p *corev1.Pod) bool {
			return daemontest.RunsWith(p, "150m", "300m") && p.Status.ObservedGeneration == p.Generation
		})
		if n := pod.Status.ContainerStatuses[0].RestartCount; n != 0 {
			t.Errorf("a CPU resize (NotRequired) restarted the container %d times", n)
		}
		if daemontest.ResizeCondition(pod, corev1.PodResizePending) != nil {
			t.Errorf("PodResizePending after the resize: %s", daemontest.DescribeResize(pod))
		}
	})

	t.Run("RestartContainer", func(t *testing.T) {
		daemontest.Kubectl(t, c, "-n", ns, "patch", "pod", "slow", "--subresource", "resize", "-p",
			`{"spec":{"containers":[{"name":"c","resources":{"requests":{"memory":"128Mi"},"limits":{"memory":"128Mi"}}}]}}`)
		daemontest.WaitPod(t, c.Client, ns, "slow", "restarted with 128Mi", func(p *corev1.Pod) bool {
			cs := p.Status.ContainerStatuses
			return len(cs) == 1 && cs[0].RestartCount == 1 && cs[0].State.Running != nil && cs[0].Resources != nil &&
				cs[0].Resources.Limits.Memory().Equal(resource.MustParse("128Mi")) &&
				daemontest.ResizeCondition(p, corev1.PodResizeInProgress) == nil
		})
	})

	t.Run("infeasible", func(t *testing.T) {
		daemontest.Kubectl(t, c, "-n", ns, "patch", "pod", "refused", "--subresource", "resize", "-p", daemontest.CPUResize)
		pod := daemontest.WaitPod(t, c.Client, ns, "refused", "PodResizePending/Infeasible", func(p *corev1.Pod) bool {
			cond := daemontest.ResizeCondition(p, corev1.PodResizePending)
			return cond != nil && cond.Reason == corev1.PodReasonInfeasible && cond.ObservedGeneration == p.Generation
		})
		if cond := daemontest.ResizeCondition(pod, corev1.PodResizePending); !strings.Contains(cond.Message, "refuse") {
			t.Errorf("Infeasible message %q does not say why", cond.Message)
		}
		if !daemontest.RunsWith(pod, "100m", "200m") {
			t.Errorf("an infeasible resize changed the reported resources: %s", daemontest.DescribeResize(pod))
		}
	})

	t.Run("deferred", func(t *testing.T) {
		daemontest.Kubectl(t, c, "-n", ns, "patch", "pod", "deferred", "--subresource", "resize", "-p", daemontest.CPUResize)
		daemontest.WaitPod(t, c.Client, ns, "deferred", "PodResizePending/Deferred", func(p *corev1.Pod) bool {
			cond := daemontest.ResizeCondition(p, corev1.PodResizePending)
			return cond != nil && cond.Reason == corev1.PodReasonDeferred && daemontest.RunsWith(p, "100m", "200m")
		})
		// The mock lets it through: the deferred resize is made.
		daemontest.Kubectl(t, c, "-n", ns, "annotate", "--overwrite", "pod", "deferred", mock.AnnotationResize+"=apply")
		pod := daemontest.WaitPod(t, c.Client, ns, "deferred", "resized", func(p *corev1.Pod) bool {
			return daemontest.RunsWith(p, "150m", "300m") && daemontest.ResizeCondition(p, corev1.PodResizePending) == nil
		})
		if daemontest.ResizeCondition(pod, corev1.PodResizeInProgress) != nil {
			t.Errorf("PodResizeInProgress after the resize: %s", daemontest.DescribeResize(pod))
		}
	})
}

// podRunsWith reports whether the pod reports the pod-level CPU request
// and limit given as running and allocated.
func podRunsWith(p *corev1.Pod, request, limit string) bool {
	r := p.Status.Resources
	return r != nil && r.Requests.Cpu().Equal(resource.MustParse(request)) && r.Limits.Cpu().Equal(resource.MustParse(limit)) &&
		p.Status.AllocatedResources.Cpu().Equal(resource.MustParse(request))
}
