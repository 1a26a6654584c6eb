package node

import (
	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/internal/podenv"
)

// Event reasons for env and envFrom references to ConfigMaps and Secrets
// that do not exist, as the prior virtual-kubelet recorded them (users alert
// on them). All are Warning events: a pod with a missing mandatory reference
// stays Pending until it appears; a missing optional one is skipped and the
// pod starts.
const (
	ReasonMandatoryConfigMapNotFound    = "MandatoryConfigMapNotFound"
	ReasonMandatoryConfigMapKeyNotFound = "MandatoryConfigMapKeyNotFound"
	ReasonMandatorySecretNotFound       = "MandatorySecretNotFound"
	ReasonMandatorySecretKeyNotFound    = "MandatorySecretKeyNotFound"
	ReasonOptionalConfigMapNotFound     = "OptionalConfigMapNotFound"
	ReasonOptionalConfigMapKeyNotFound  = "OptionalConfigMapKeyNotFound"
	ReasonOptionalSecretNotFound        = "OptionalSecretNotFound"
	ReasonOptionalSecretKeyNotFound     = "OptionalSecretKeyNotFound"
)

// missingReasons indexes the reasons by optional, kind and whether a key
// (rather than the whole object) is missing.
var missingReasons = map[bool]map[string][2]string{
	false: {
		"ConfigMap": {ReasonMandatoryConfigMapNotFound, ReasonMandatoryConfigMapKeyNotFound},
		"Secret":    {ReasonMandatorySecretNotFound, ReasonMandatorySecretKeyNotFound},
	},
	true: {
		"ConfigMap": {ReasonOptionalConfigMapNotFound, ReasonOptionalConfigMapKeyNotFound},
		"Secret":    {ReasonOptionalSecretNotFound, ReasonOptionalSecretKeyNotFound},
	},
}

// recordMissingRefs records a Warning event on pod for each missing
// reference.
func (pc *PodController) recordMissingRefs(pod *corev1.Pod, optional bool, missing ...podenv.MissingError) {
	for _, m := range missing {
		byKey := missingReasons[optional][m.Kind]
		reason := byKey[0]
		if m.Key != "" {
			reason = byKey[1]
		}
		if optional {
			pc.recorder.Eventf(pod, corev1.EventTypeWarning, reason, "skipping optional reference: %v", &m)
		} else {
			pc.recorder.Eventf(pod, corev1.EventTypeWarning, reason, "%v", &m)
		}
	}
}
