// Package poll waits, in tests against a real system, for a condition to
// hold: it polls with a deadline (never a fixed sleep) and fails the test
// naming what it awaited and what the condition said last. It is public
// because the end-to-end suite (test/e2e), which providers' own modules
// import, uses it.
package poll

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes"
)

// Interval is how often a condition is polled.
const Interval = 100 * time.Millisecond

// Until polls cond until it holds; once limit has passed it fails t with
// what and cond's last message.
func Until(t testing.TB, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	var last string
	err := wait.PollUntilContextTimeout(context.Background(), Interval, limit, true, func(context.Context) (bool, error) {
		ok, msg := cond()
		last = msg
		return ok, nil
	})
	if err != nil {
		t.Fatalf("timed out after %s waiting for %s; last: %s", limit, what, strings.TrimSpace(last))
	}
}

// Pod polls the named pod until cond holds for it, as Until does, and
// returns it.
func Pod(t testing.TB, client kubernetes.Interface, limit time.Duration, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	var pod *corev1.Pod
	Until(t, limit, fmt.Sprintf("pod %s/%s %s", ns, name, what), func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		pod = p
		return cond(p), fmt.Sprintf("phase %s, reason %q, containers %+v", p.Status.Phase, p.Status.Reason, p.Status.ContainerStatuses)
	})
	return pod
}
