package provider

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// PodStatusFrom answers GetPodStatus for a provider whose GetPod returns
// its pods with their status: the status of the pod get (the provider's
// GetPod) returns, or its error. A pod get does not have and reports as
// (nil, nil) has no status (nil, nil), which the pod controller takes for
// lost, as it takes errdefs.NotFound.
func PodStatusFrom(ctx context.Context, get func(ctx context.Context, namespace, name string) (*corev1.Pod, error), namespace, name string) (*corev1.PodStatus, error) {
	pod, err := get(ctx, namespace, name)
	if err != nil || pod == nil {
		return nil, err
	}
	return &pod.Status, nil
}
