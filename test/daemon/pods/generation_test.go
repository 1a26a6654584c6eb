//go:build e2e

package pods_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
)

// TestObservedGenerationAfterImageChange: an image change bumps the pod's
// metadata.generation, and once the node has acted on it the pod's
// status.observedGeneration and every condition's observedGeneration
// (PodScheduled, which the API server's binding set without one, among
// them) equal it, as a 1.36 kubelet writes them.
func TestObservedGenerationAfterImageChange(t *testing.T) {
	c, ns, d := daemontest.ReadyMockNode(t)

	pod := daemontest.MockPod("gen", d.Name, corev1.RestartPolicyAlways, nil)
	daemontest.CreatePods(t, c.Client, ns, pod)
	first := daemontest.WaitPod(t, c.Client, ns, "gen", "Running, its generation observed", func(p *corev1.Pod) bool {
		return daemontest.Running(p) && generationObserved(p)
	})

	daemontest.Kubectl(t, c, "-n", ns, "set", "image", "pod/gen", "main=busybox:1.37")
	updated, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "gen", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if updated.Generation <= first.Generation {
		t.Fatalf("the image change left metadata.generation at %d (was %d)", updated.Generation, first.Generation)
	}
	daemontest.Eventually(t, fmt.Sprintf("status and conditions at generation %d", updated.Generation), func() (bool, string) {
		p, err := c.Client.CoreV1().Pods(ns).Get(context.Background(), "gen", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return p.Generation == updated.Generation && generationObserved(p) &&
			daemontest.MainContainer(p).Image == "busybox:1.37", describeGenerations(p)
	})
}

// generationObserved reports whether the pod's status, and each of its
// conditions, shows its current generation.
func generationObserved(p *corev1.Pod) bool {
	if p.Status.ObservedGeneration != p.Generation || len(p.Status.Conditions) == 0 {
		return false
	}
	for _, c := range p.Status.Conditions {
		if c.ObservedGeneration != p.Generation {
			return false
		}
	}
	return true
}

// describeGenerations says which generations a pod's status shows.
func describeGenerations(p *corev1.Pod) string {
	var b strings.Builder
	fmt.Fprintf(&b, "generation=%d observed=%d image=%s", p.Generation, p.Status.ObservedGeneration, daemontest.MainContainer(p).Image)
	for _, c := range p.Status.Conditions {
		fmt.Fprintf(&b, " %s=%d", c.Type, c.ObservedGeneration)
	}
	return b.String()
}
