package kubernetes

import (
	"context"
	"errors"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/tools/record"
)

// TestReflectionBudget: objects and bytes are bounded; an object counted
// again at its new size, shrinking past the bound, and released objects
// free their share.
func TestReflectionBudget(t *testing.T) {
	b := newReflectionBudget(2, 100)
	for _, step := range []struct {
		key   string
		size  int
		limit bool
	}{
		{"a", 40, false},
		{"b", 50, false},
		{"c", 1, true},   // a third object
		{"a", 60, true},  // 110 bytes
		{"a", 50, false}, // 100 bytes
		{"b", 40, false}, // shrinks
	} {
		err := b.reserve(step.key, step.size)
		if errors.Is(err, errReflectionLimit) != step.limit {
			t.Fatalf("reserve(%s, %d): %v", step.key, step.size, err)
		}
	}
	if n, bytes := b.usage(); n != 2 || bytes != 90 {
		t.Fatalf("usage %d objects, %d bytes; want 2, 90", n, bytes)
	}
	b.release("a")
	if err := b.reserve("c", 60); err != nil {
		t.Fatal(err)
	}
	if n, bytes := b.usage(); n != 2 || bytes != 100 {
		t.Fatalf("usage %d objects, %d bytes; want 2, 100", n, bytes)
	}
}

// TestCopiesBounded: a pod whose copies would pass the node's bounds is
// not created in B, and gets a ReflectionLimit Warning in A; the copies
// within the bounds are made.
func TestCopiesBounded(t *testing.T) {
	p, client, _ := objectsProvider(t, Config{Reflection: ReflectionConfig{MaxObjects: 1}})
	recorder := record.NewFakeRecorder(10)
	p.recorder = recorder
	pod := podUsing("used")
	pod.Spec.Volumes = append(pod.Spec.Volumes, corev1.Volume{Name: "w", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
		LocalObjectReference: corev1.LocalObjectReference{Name: "fresh"}}}})
	_, err := p.objects.copyFor(context.Background(), pod)
	if !errors.Is(err, errReflectionLimit) {
		t.Fatalf("copying two objects with maxObjects 1: %v", err)
	}
	select {
	case e := <-recorder.Events:
		if !strings.HasPrefix(e, "Warning "+ReasonReflectionLimit+" ") || !strings.Contains(e, "reflection.maxObjects") {
			t.Errorf("Event %q", e)
		}
	default:
		t.Error("no Event on the pod")
	}
	if !exists(t, client, copyOf(t, p, "used", "")) || exists(t, client, copyOf(t, p, "fresh", "")) {
		t.Error("want the first copy made and the second not")
	}
}
