package daemontest

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

// DescribeResize says what a failed resize check saw: the pod's
// generations, resources and resize conditions.
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
