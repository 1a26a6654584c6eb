package mock

import (
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/record"
)

// Event reasons the mock records on a pod when a node-wide bound refuses
// what the pod asked for.
const (
	// ReasonHangRefused: a call the pod's hang-calls annotation names ran
	// at once, since the node's hanging calls were at their bound.
	ReasonHangRefused = "HangRefused"
	// ReasonCopyRefused: a copy into one of the pod's containers (kubectl
	// cp) was refused, past the container's or the node's bound.
	ReasonCopyRefused = "CopyRefused"
	// ReasonFailed: a container failed to start (AnnotationFailStart), the
	// kubelet's reason for it, with its message "Error: <the message>".
	ReasonFailed = "Failed"
)

// maxEventMessage is the longest message the mock records, the limit of an
// events.k8s.io note: a message quotes what the pod asked for (a copied
// file's name, as long as a tar header can make it).
const maxEventMessage = 1024

// podEvents records Warning Events on the node's pods, so a pod's author
// learns what the node refused them; without a recorder (a plugin process
// has no API server to write to) it records nothing.
type podEvents struct{ recorder record.EventRecorder }

func (e podEvents) warn(namespace, name string, uid types.UID, reason, message string) {
	e.warnOn(namespace, name, uid, "", reason, message)
}

// warnOn records a Warning on the pod, or on one of its containers when
// fieldPath names it (spec.containers{app}), as the kubelet's container
// Events are.
func (e podEvents) warnOn(namespace, name string, uid types.UID, fieldPath, reason, message string) {
	if e.recorder == nil || name == "" {
		return
	}
	ref := &corev1.ObjectReference{Kind: "Pod", APIVersion: "v1", Namespace: namespace, Name: name, UID: uid, FieldPath: fieldPath}
	e.record(ref, corev1.EventTypeWarning, reason, message)
}

// record records an Event of type typ on the object ref names (a stage's
// Event, on a pod or the node).
func (e podEvents) record(ref *corev1.ObjectReference, typ, reason, message string) {
	if e.recorder == nil || ref.Name == "" {
		return
	}
	if len(message) > maxEventMessage {
		message = strings.ToValidUTF8(message[:maxEventMessage-len("...")], "") + "..."
	}
	e.recorder.Event(ref, typ, reason, message)
}
