//go:build e2e

package faults_test

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// A pod author asks the mock for what would spend its whole node: calls
// that hang on every pod-sync worker, copies that fill the daemon's memory.
// The node-wide bounds refuse them, with an Event on the pod.

// timeToRunning creates plain pods named prefix-0.. on the node and returns
// how long the slowest took from its create to Running, as polled.
func timeToRunning(t *testing.T, client kubernetes.Interface, ns, node, prefix string, count int) time.Duration {
	t.Helper()
	created := map[string]time.Time{}
	for i := range count {
		name := fmt.Sprintf("%s-%d", prefix, i)
		created[name] = time.Now()
		daemontest.CreatePods(t, client, ns, daemontest.MockPod(name, node, corev1.RestartPolicyAlways, nil))
	}
	var slowest time.Duration
	for name := range created {
		poll.Pod(t, client, daemontest.Timeout, ns, name, "Running", daemontest.Running)
		slowest = max(slowest, time.Since(created[name]))
	}
	return slowest
}

// hangRefusals counts the HangRefused Events in ns whose message names
// call, and checks each names the node's bound.
func hangRefusals(t *testing.T, client kubernetes.Interface, ns, call, bound string) int {
	t.Helper()
	events, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{FieldSelector: "reason=" + mock.ReasonHangRefused})
	if err != nil {
		t.Fatal(err)
	}
	n := 0
	for _, e := range events.Items {
		if e.Type != corev1.EventTypeWarning || !strings.Contains(e.Message, bound) {
			t.Errorf("HangRefused Event on %s: %s %q, want a Warning naming %q", e.InvolvedObject.Name, e.Type, e.Message, bound)
		}
		if strings.HasPrefix(e.Message, call+" ") {
			n++
		}
	}
	return n
}

// TestHangingPodsLeaveTheNodeServing: 50 pods whose UpdatePod and DeletePod
// hang (a minute each, the most a hang lasts), their labels edited and then
// deleted, would hold every one of the node's 50 pod-sync workers; the
// bound lets a quarter hang, the rest run at once with a HangRefused Event,
// and new pods run within the node's normal latency, measured first.
func TestHangingPodsLeaveTheNodeServing(t *testing.T) {
	const (
		workers = 50
		hangers = 50
		bounded = workers / 4
	)
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	d := daemontest.Start(t, c, nil, "--pod-sync-workers", fmt.Sprint(workers))
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	ctx := context.Background()
	pods := c.Client.CoreV1().Pods(ns)

	baseline := timeToRunning(t, c.Client, ns, d.Name, "before", 3)
	t.Logf("baseline: 3 plain pods Running within %s", baseline)

	hang := map[string]string{mock.AnnotationHangCalls: "UpdatePod,DeletePod"}
	for i := range hangers {
		daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod(fmt.Sprintf("hang-%d", i), d.Name, corev1.RestartPolicyAlways, hang))
	}
	var names []string
	for i := range hangers {
		names = append(names, fmt.Sprintf("hang-%d", i))
		daemontest.WaitPod(t, c.Client, ns, names[i], "Running", daemontest.Running)
	}

	// The attack: every hanging pod's UpdatePod, then its DeletePod.
	attacked := time.Now()
	for _, name := range names {
		patch := []byte(`{"metadata":{"labels":{"edited":"yes"}}}`)
		if _, err := pods.Patch(ctx, name, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	bound := fmt.Sprintf("node %s lets at most %d calls hang at a time (a quarter of its %d pod-sync workers", d.Name, bounded, workers)
	// The control: the bound is what refuses them (an Event for each call
	// past it), not calls that never hang.
	daemontest.Eventually(t, "the UpdatePod hangs past the bound refused", func() (bool, string) {
		n := hangRefusals(t, c.Client, ns, "UpdatePod", bound)
		return n >= hangers-bounded, fmt.Sprintf("%d refused", n)
	})
	for _, name := range names {
		if err := pods.Delete(ctx, name, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Those whose DeletePod was refused its hang go at once; the others
	// wait behind their hanging UpdatePod.
	daemontest.Eventually(t, "the pods refused their hangs deleted", func() (bool, string) {
		list, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false, err.Error()
		}
		left := 0
		for _, p := range list.Items {
			if strings.HasPrefix(p.Name, "hang-") {
				left++
			}
		}
		return left <= bounded, fmt.Sprintf("%d hanging pods left", left)
	})

	during := timeToRunning(t, c.Client, ns, d.Name, "during", 3)
	t.Logf("while %d calls hang: 3 plain pods Running within %s (baseline %s)", bounded, during, baseline)
	switch held := time.Since(attacked); {
	case during > 3*baseline+2*time.Second:
		t.Errorf("new pods took %s to run while pods' calls hang, past 3× the baseline %s + 2s", during, baseline)
	case held >= mock.MaxHang:
		t.Fatalf("the measurement ended %s after the hangs began, past their %s: it proves nothing", held, mock.MaxHang)
	}
	if n := hangRefusals(t, c.Client, ns, "DeletePod", bound); n == 0 {
		t.Error("no DeletePod hang was refused while the bound's places were held")
	}
	daemontest.CheckNoPanic(t, d)
}

// TestCopiesAreBoundedPerNode: kubectl cp into the containers of a node
// whose provider config allows 1Mi of copies in all: a copy that fits goes
// in, one past what is left is refused with a line naming the bound and a
// CopyRefused Event on its pod, and deleting the first pod frees the room.
func TestCopiesAreBoundedPerNode(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	name := testcluster.UniqueName("vk")
	d := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")), "--nodename", name,
		"--provider-config", mockConfig(t, name, `{"maxCopiedBytes": "1Mi"}`))
	daemontest.WaitNodeReady(t, c.Client, d.Name)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod("first", d.Name, corev1.RestartPolicyAlways, nil), daemontest.MockPod("second", d.Name, corev1.RestartPolicyAlways, nil))
	first := daemontest.WaitPod(t, c.Client, ns, "first", "Running", daemontest.Running)
	daemontest.WaitPod(t, c.Client, ns, "second", "Running", daemontest.Running)

	file := filepath.Join(t.TempDir(), "part.bin")
	if err := os.WriteFile(file, make([]byte, 600<<10), 0o600); err != nil {
		t.Fatal(err)
	}
	if out, err := c.Kubectl(ctx, "-n", ns, "cp", file, "first:/srv/part.bin", "-c", "main"); err != nil {
		t.Fatalf("kubectl cp of 600Ki into the first pod: %v\n%s", err, out)
	}
	out, err := c.Kubectl(ctx, "-n", ns, "cp", file, "second:/srv/part.bin", "-c", "main")
	want := fmt.Sprintf("tar: /srv/part.bin: node %s holds at most 1Mi copied into its containers (maxCopiedBytes in the provider config)", d.Name)
	if err == nil || !strings.Contains(out, want) {
		t.Errorf("kubectl cp past the node's bound: %v\n%s\nwant it refused with %q", err, out, want)
	}
	daemontest.Eventually(t, "a CopyRefused Event on the second pod", func() (bool, string) {
		events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: "involvedObject.name=second,reason=" + mock.ReasonCopyRefused})
		if err != nil {
			return false, err.Error()
		}
		for _, e := range events.Items {
			if e.Type == corev1.EventTypeWarning && strings.Contains(e.Message, strings.TrimPrefix(want, "tar: ")) {
				return true, ""
			}
		}
		return false, fmt.Sprintf("%d Events: %v", len(events.Items), events.Items)
	})

	if err := c.Client.CoreV1().Pods(ns).Delete(ctx, "first", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitGone(t, c.Client, ns, "first", first.UID)
	if out, err := c.Kubectl(ctx, "-n", ns, "cp", file, "second:/srv/part.bin", "-c", "main"); err != nil {
		t.Errorf("kubectl cp once the first pod is gone: %v\n%s", err, out)
	}
	daemontest.CheckNoPanic(t, d)
}
