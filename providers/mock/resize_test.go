package mock

import (
	"context"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

func cpu(request string) corev1.ResourceRequirements {
	return corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse(request)}}
}

func runsWithCPU(p *corev1.Pod, request string) bool {
	r := p.Status.ContainerStatuses[0].Resources
	return r != nil && r.Requests.Cpu().Equal(resource.MustParse(request))
}

func TestResizeAsScripted(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name        string
		annotations map[string]string
		restart     bool
		want        node.ResizeOutcome
		wantMsg     string
	}{
		{name: "applied at once", want: node.ResizeDone},
		{name: "applied with a restart", restart: true, want: node.ResizeDone},
		{name: "in progress", annotations: map[string]string{AnnotationResizeDelay: "50ms"}, want: node.ResizeInProgress},
		{name: "deferred", annotations: map[string]string{AnnotationResize: "defer"}, want: node.ResizeDeferred, wantMsg: "defer"},
		{name: "refused", annotations: map[string]string{AnnotationResize: "refuse"}, want: node.ResizeInfeasible, wantMsg: "refuse"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, r := newProvider(t)
			pod := testPod("web", tc.annotations, corev1.RestartPolicyAlways)
			pod.Spec.Containers[0].Resources = cpu("100m")
			if err := p.CreatePod(ctx, pod); err != nil {
				t.Fatal(err)
			}
			if !runsWithCPU(r.last(), "100m") {
				t.Fatalf("created pod reports %v", r.last().Status.ContainerStatuses[0].Resources)
			}
			resized := pod.DeepCopy()
			resized.Spec.Containers[0].Resources = cpu("200m")
			res, err := p.ResizePod(ctx, node.ResizeRequest{Pod: resized, Containers: []node.ContainerResize{{Name: "app", From: cpu("100m"), To: cpu("200m"), Restart: tc.restart}}})
			if err != nil || res.Outcome != tc.want || !strings.Contains(res.Message, tc.wantMsg) {
				t.Fatalf("ResizePod = %+v, %v; want %s with %q", res, err, tc.want, tc.wantMsg)
			}
			if tc.want == node.ResizeDeferred || tc.want == node.ResizeInfeasible {
				if !runsWithCPU(r.last(), "100m") {
					t.Errorf("a %s resize changed the resources", tc.want)
				}
				return
			}
			got := r.waitFor(t, "runs with the new resources", func(p *corev1.Pod) bool { return runsWithCPU(p, "200m") })
			if n := got.Status.ContainerStatuses[0].RestartCount; (n == 1) != tc.restart {
				t.Errorf("restart count %d, restart asked %v", n, tc.restart)
			}
			// UpdatePod with the resources applied changes nothing.
			if err := p.UpdatePod(ctx, resized); err != nil || got.Status.ContainerStatuses[0].RestartCount != r.last().Status.ContainerStatuses[0].RestartCount {
				t.Errorf("UpdatePod after the resize: %v", err)
			}
		})
	}
}

func TestResizeThroughUpdatePod(t *testing.T) {
	p, r := newProvider(t)
	pod := testPod("web", nil, corev1.RestartPolicyAlways)
	pod.Spec.Containers[0].Resources = cpu("100m")
	pod.Spec.Containers[0].ResizePolicy = []corev1.ContainerResizePolicy{{ResourceName: corev1.ResourceCPU, RestartPolicy: corev1.RestartContainer}}
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Spec.Containers[0].Resources = cpu("200m")
	if err := p.UpdatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	if got := r.last(); !runsWithCPU(got, "200m") || got.Status.ContainerStatuses[0].RestartCount != 1 {
		t.Errorf("after UpdatePod: %+v", got.Status.ContainerStatuses[0])
	}
}

func TestBadResizeScript(t *testing.T) {
	p, _ := newProvider(t)
	for ann, value := range map[string]string{AnnotationResize: "maybe", AnnotationResizeDelay: "soon"} {
		err := p.CreatePod(context.Background(), testPod("bad", map[string]string{ann: value}, corev1.RestartPolicyAlways))
		if !errdefs.IsInvalidInput(err) || !strings.Contains(err.Error(), ann) {
			t.Errorf("%s=%q: %v", ann, value, err)
		}
	}
	// Made bad after the pod started: the resize is infeasible, saying why.
	pod := testPod("web", nil, corev1.RestartPolicyAlways)
	if err := p.CreatePod(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	pod.Annotations = map[string]string{AnnotationResize: "maybe"}
	res, err := p.ResizePod(context.Background(), node.ResizeRequest{Pod: pod, Containers: []node.ContainerResize{{Name: "app", To: cpu("1")}}})
	if err != nil || res.Outcome != node.ResizeInfeasible || !strings.Contains(res.Message, AnnotationResize) {
		t.Errorf("ResizePod = %+v, %v", res, err)
	}
}
