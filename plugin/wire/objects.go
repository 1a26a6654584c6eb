package wire

import (
	"fmt"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// kubeObject is a k8s.io/api type with its generated protobuf codec.
type kubeObject[T any] interface {
	*T
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// Encode is obj in the Kubernetes protobuf encoding. A nil obj is an
// error (the generated codec would panic on it).
func Encode[T any, P kubeObject[T]](obj P) ([]byte, error) {
	if obj == nil {
		return nil, fmt.Errorf("nil %T", obj)
	}
	return obj.Marshal()
}

// Decode reads a T in the Kubernetes protobuf encoding; what names the
// bytes (the call and field) in the error, so a plugin sending garbage is
// told which of its answers is wrong. Empty bytes are an error: every
// object the contract carries has content.
func Decode[T any, P kubeObject[T]](what string, data []byte) (*T, error) {
	if len(data) == 0 {
		return nil, fmt.Errorf("%s: empty, want a %T in the Kubernetes protobuf encoding", what, P(new(T)))
	}
	obj := P(new(T))
	if err := obj.Unmarshal(data); err != nil {
		return nil, fmt.Errorf("%s: malformed %T in the Kubernetes protobuf encoding (%d bytes): %v", what, obj, len(data), err)
	}
	return obj, nil
}

// knownPhases are the pod phases of core/v1; empty means not reported yet.
var knownPhases = map[corev1.PodPhase]bool{
	"": true, corev1.PodPending: true, corev1.PodRunning: true, corev1.PodSucceeded: true, corev1.PodFailed: true, corev1.PodUnknown: true,
}

// DecodePod reads a pod and checks what the daemon relies on: it is named
// and its phase is one of core/v1's.
func DecodePod(what string, data []byte) (*corev1.Pod, error) {
	pod, err := Decode[corev1.Pod](what, data)
	if err != nil {
		return nil, err
	}
	if pod.Name == "" {
		return nil, fmt.Errorf("%s: pod without a name", what)
	}
	if err := checkPhase(pod.Status.Phase); err != nil {
		return nil, fmt.Errorf("%s: pod %s/%s: %w", what, pod.Namespace, pod.Name, err)
	}
	return pod, nil
}

// DecodePodStatus reads a pod status and checks its phase.
func DecodePodStatus(what string, data []byte) (*corev1.PodStatus, error) {
	status, err := Decode[corev1.PodStatus](what, data)
	if err != nil {
		return nil, err
	}
	if err := checkPhase(status.Phase); err != nil {
		return nil, fmt.Errorf("%s: %w", what, err)
	}
	return status, nil
}

func checkPhase(phase corev1.PodPhase) error {
	if !knownPhases[phase] {
		return fmt.Errorf("unknown phase %q (Pending, Running, Succeeded, Failed, Unknown)", phase)
	}
	return nil
}

// EncodeResources is a ResourceList as the contract's map of resource name
// to quantity string.
func EncodeResources(list corev1.ResourceList) map[string]string {
	out := make(map[string]string, len(list))
	for name, q := range list {
		out[string(name)] = q.String()
	}
	return out
}

// DecodeResources reads a map of resource name to quantity; what names it
// in the error, which names the resource whose quantity is malformed.
func DecodeResources(what string, in map[string]string) (corev1.ResourceList, error) {
	out := make(corev1.ResourceList, len(in))
	for name, s := range in {
		q, err := resource.ParseQuantity(s)
		if err != nil {
			return nil, fmt.Errorf("%s: resource %q: malformed quantity %q: %v", what, name, s, err)
		}
		out[corev1.ResourceName(name)] = q
	}
	return out, nil
}
