package provider

import (
	"context"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// NodeBasics answers the parts of Provider that come straight from the
// InitConfig; a provider embeds it.
type NodeBasics struct {
	OS         string
	InternalIP string
	DaemonPort int32
}

// NodeBasicsFrom takes the node's basics from the init config.
func NodeBasicsFrom(ic InitConfig) NodeBasics {
	return NodeBasics{OS: ic.OperatingSystem, InternalIP: ic.InternalIP, DaemonPort: ic.DaemonPort}
}

// NodeAddresses reports the InternalIP the daemon was given.
func (b NodeBasics) NodeAddresses(context.Context) []corev1.NodeAddress {
	if b.InternalIP == "" {
		return nil
	}
	return []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: b.InternalIP}}
}

// NodeDaemonEndpoints reports the kubelet API port.
func (b NodeBasics) NodeDaemonEndpoints(context.Context) *corev1.NodeDaemonEndpoints {
	return &corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: b.DaemonPort}}
}

// OperatingSystem is the --os flag.
func (b NodeBasics) OperatingSystem() string { return b.OS }

// HealthyConditions are the conditions of a node that is Ready with no
// pressure since the given time; who names the backend in the messages
// ("mock provider is ready").
func HealthyConditions(since time.Time, who string) []corev1.NodeCondition {
	t := metav1.NewTime(since)
	cond := func(typ corev1.NodeConditionType, s corev1.ConditionStatus, reason, msg string) corev1.NodeCondition {
		return corev1.NodeCondition{Type: typ, Status: s, Reason: reason, Message: who + " " + msg, LastTransitionTime: t}
	}
	return []corev1.NodeCondition{
		cond(corev1.NodeReady, corev1.ConditionTrue, "KubeletReady", "is ready"),
		cond(corev1.NodeMemoryPressure, corev1.ConditionFalse, "KubeletHasSufficientMemory", "has sufficient memory"),
		cond(corev1.NodeDiskPressure, corev1.ConditionFalse, "KubeletHasNoDiskPressure", "has no disk pressure"),
		cond(corev1.NodePIDPressure, corev1.ConditionFalse, "KubeletHasSufficientPID", "has sufficient PID"),
		cond(corev1.NodeNetworkUnavailable, corev1.ConditionFalse, "RouteCreated", "has a network"),
	}
}
