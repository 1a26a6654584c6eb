package provider

import (
	"context"
	"errors"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

func TestPodStatusFrom(t *testing.T) {
	ctx := context.Background()
	running := &corev1.Pod{Status: corev1.PodStatus{Phase: corev1.PodRunning}}
	gone := errors.New("no such pod")
	for _, tc := range []struct {
		name  string
		pod   *corev1.Pod
		err   error
		phase corev1.PodPhase
	}{
		{"the pod's status", running, nil, corev1.PodRunning},
		{"the error", nil, gone, ""},
		{"no pod, no status", nil, nil, ""},
	} {
		var asked string
		get := func(_ context.Context, namespace, name string) (*corev1.Pod, error) {
			asked = namespace + "/" + name
			return tc.pod, tc.err
		}
		s, err := PodStatusFrom(ctx, get, "ns", "p")
		if asked != "ns/p" || !errors.Is(err, tc.err) || (s == nil) != (tc.phase == "") || s != nil && s.Phase != tc.phase {
			t.Errorf("%s: asked %q, got %v, %v", tc.name, asked, s, err)
		}
	}
}
