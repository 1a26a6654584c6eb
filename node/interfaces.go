package node

import (
	"context"

	corev1 "k8s.io/api/core/v1"
)

// PodLifecycleHandler defines the interface used by the PodController to react
// to new and changed pods scheduled to the node that is being managed.
//
// Errors produced by these methods should use the kinds of package errdefs so
// the controller can tell what failed: errdefs.NotFound from GetPod,
// GetPodStatus or DeletePod means the pod is not (or no longer) in the provider.
type PodLifecycleHandler interface {
	// CreatePod takes a Kubernetes Pod and deploys it within the provider.
	// The pod's environment is resolved: env and envFrom hold plain values
	// from ConfigMaps, Secrets, the downward API and service links.
	CreatePod(ctx context.Context, pod *corev1.Pod) error

	// UpdatePod takes a Kubernetes Pod and updates it within the provider.
	// It is called only when the pod's spec, labels or annotations changed.
	UpdatePod(ctx context.Context, pod *corev1.Pod) error

	// DeletePod takes a Kubernetes Pod and deletes it from the provider. Once
	// a pod is deleted, the provider is expected to call the NotifyPods
	// callback with a terminal pod status where all the containers are in a
	// terminal state, as well as the pod. DeletePod may be called multiple
	// times for the same pod.
	DeletePod(ctx context.Context, pod *corev1.Pod) error

	// GetPod retrieves a pod by name from the provider (can be cached).
	// The Pod returned is expected to be immutable, and may be accessed
	// concurrently outside of the calling goroutine. Therefore it is
	// recommended to return a version after DeepCopy.
	GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error)

	// GetPodStatus retrieves the status of a pod by name from the provider.
	// The PodStatus returned is expected to be immutable, and may be accessed
	// concurrently outside of the calling goroutine. Therefore it is
	// recommended to return a version after DeepCopy.
	GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error)

	// GetPods retrieves a list of all pods running on the provider (can be
	// cached). The Pods returned are expected to be immutable, and may be
	// accessed concurrently outside of the calling goroutine. Therefore it is
	// recommended to return a version after DeepCopy.
	GetPods(context.Context) ([]*corev1.Pod, error)
}

// PodNotifier is used as an extension to PodLifecycleHandler to support async
// updates of pod statuses. A provider that does not implement it is polled
// with GetPodStatus instead.
type PodNotifier interface {
	// NotifyPods instructs the notifier to call the passed in function when
	// the pod status changes. It should be called when a pod's status
	// changes.
	//
	// The provided pointer to a Pod is guaranteed to be used in a read-only
	// fashion. The provided pod's PodStatus should be up to date when this
	// function is called.
	//
	// A pod the provider lost (deleted behind its back) is reported with
	// status.reason ReasonProviderLost: the controller then creates it
	// again or marks it Failed, as its restart policy says.
	//
	// NotifyPods must not block the caller since it is only used to register
	// the callback. The callback passed into NotifyPods may block when called.
	NotifyPods(context.Context, func(*corev1.Pod))
}

// NodeProvider is the interface used for registering a node and updating its
// status in Kubernetes.
//
// Note: Implementers can choose to manage a node themselves, in which case it
// is not needed to provide an implementation for this interface.
type NodeProvider interface {
	// Ping checks if the node is still active.
	// This is intended to be lightweight as it will be called periodically
	// as a heartbeat to keep the node marked as ready in Kubernetes.
	Ping(context.Context) error

	// NotifyNodeStatus is used to asynchronously monitor the node.
	// The passed in callback should be called any time there is a change to
	// the node's status. This will generally trigger a call to the
	// Kubernetes API server to update the status.
	//
	// The node passed is the whole node as the provider wants it: its
	// labels, annotations, spec (taints included) and status replace the
	// ones given before, and what they leave out that was set before is
	// removed from the Node (what other clients set stays).
	//
	// NotifyNodeStatus should not block callers.
	NotifyNodeStatus(ctx context.Context, cb func(*corev1.Node))
}

// ErrorHandler is a type of function used to allow callbacks for handling
// errors. It is expected that if a nil error is returned that the error is
// handled and progress can continue (or a retry is possible).
type ErrorHandler func(context.Context, error) error

// PodEventFilterFunc is used to filter pod events received from Kubernetes.
//
// Filters that return true means the event handler will be run.
// Filters that return false means the filter will *not* be run.
type PodEventFilterFunc func(context.Context, *corev1.Pod) bool
