package daemontest

import (
	"context"
	"fmt"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
)

// UserNamespaces is what node's status.runtimeHandlers says of user
// namespaces; ok is false when it says nothing (not one handler with the
// feature set).
func UserNamespaces(node *corev1.Node) (supported, ok bool) {
	h := node.Status.RuntimeHandlers
	if len(h) != 1 || h[0].Features == nil || h[0].Features.UserNamespaces == nil {
		return false, false
	}
	return *h[0].Features.UserNamespaces, true
}

// WaitRefused waits for pod name to be refused as a kubelet refuses a pod
// it cannot start: Pending, its main container waiting with a message
// saying says, and a Warning Event of reason saying it too.
func WaitRefused(t *testing.T, client kubernetes.Interface, ns, name, reason, says string) *corev1.Pod {
	t.Helper()
	pod := WaitPod(t, client, ns, name, "Pending, its container waiting with the reason", func(p *corev1.Pod) bool {
		w := MainContainer(p).State.Waiting
		return p.Status.Phase == corev1.PodPending && w != nil && strings.Contains(w.Message, says)
	})
	Eventually(t, name+"'s "+reason+" Event", func() (bool, string) {
		evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name + ",reason=" + reason})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range evs.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, says) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d events", len(evs.Items))
	})
	return pod
}
