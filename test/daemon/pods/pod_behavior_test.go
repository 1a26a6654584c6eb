//go:build e2e

package pods_test

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// These tests check that pods on a virtual node behave as on a kubelet, as
// a user sees them through kubectl: the pod's IP in its environment, lost
// pods restarted by their restart policy, the previous run's log.

// ipPod is a pod whose environment holds its IPs, directly and through a
// $(VAR) reference.
func ipPod(name, node string) *corev1.Pod {
	field := func(path string) *corev1.EnvVarSource {
		return &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{
			NodeName: node, Tolerations: daemontest.Tolerate,
			Containers: []corev1.Container{{Name: "app", Image: "busybox", Env: []corev1.EnvVar{
				{Name: "MY_IP", ValueFrom: field("status.podIP")},
				{Name: "MY_IPS", ValueFrom: field("status.podIPs")},
				{Name: "URL", Value: "http://$(MY_IP):8080/"},
			}}},
		},
	}
}

// printenv runs `kubectl exec POD -- printenv NAME` and returns the value.
func printenv(t *testing.T, c *testcluster.Cluster, ns, pod, name string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.Kubectl(ctx, "-n", ns, "exec", pod, "--", "printenv", name)
	if err != nil {
		t.Fatalf("kubectl exec %s -- printenv %s: %v\n%s", pod, name, err, out)
	}
	return strings.TrimSuffix(out, "\n")
}

// TestPodIPInEnvironment: a container's status.podIP(s) env and $(VAR)
// uses of it hold the IP `kubectl get pod -o wide` shows: the mock's own
// choice on a node without a pod CIDR, one from the node's pod CIDRs
// (dual-stack) once it has them. A node reads its pod CIDRs from the API
// server, or with a watch of Nodes shared by the process's nodes, from it.
func TestPodIPInEnvironment(t *testing.T) {
	t.Run("own node", func(t *testing.T) { testPodIPInEnvironment(t) })
	t.Run("shared-pod-watch", func(t *testing.T) { testPodIPInEnvironment(t, "--shared-pod-watch") })
}

func testPodIPInEnvironment(t *testing.T, args ...string) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	d := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")), args...)
	daemontest.WaitNodeReady(t, c.Client, d.Name)

	check := func(name string) *corev1.Pod {
		t.Helper()
		pod := daemontest.WaitPod(t, c.Client, ns, name, "Running", daemontest.Running)
		ip := pod.Status.PodIP
		if ip == "" {
			t.Fatalf("%s: no pod IP", name)
		}
		wide := daemontest.Kubectl(t, c, "-n", ns, "get", "pod", name, "-o", "wide", "--no-headers")
		if !strings.Contains(wide, " "+ip+" ") {
			t.Errorf("kubectl get pod -o wide does not show %s:\n%s", ip, wide)
		}
		if got := printenv(t, c, ns, name, "MY_IP"); got != ip {
			t.Errorf("%s: MY_IP=%q, pod IP %s", name, got, ip)
		}
		var ips []string
		for _, p := range pod.Status.PodIPs {
			ips = append(ips, p.IP)
		}
		if got := printenv(t, c, ns, name, "MY_IPS"); got != strings.Join(ips, ",") {
			t.Errorf("%s: MY_IPS=%q, pod IPs %v", name, got, ips)
		}
		if got := printenv(t, c, ns, name, "URL"); got != "http://"+ip+":8080/" {
			t.Errorf("%s: URL=%q: $(MY_IP) not expanded to %s", name, got, ip)
		}
		return pod
	}

	daemontest.CreatePods(t, c.Client, ns, ipPod("own", d.Name))
	check("own")
	// The pod controller asked for the node's pod CIDRs before it created
	// the pod: by now at the latest.
	asked := time.Now()

	// As the controller-manager's node IPAM would (--allocate-node-cidrs).
	patch := `{"spec":{"podCIDR":"10.251.0.0/24","podCIDRs":["10.251.0.0/24","fd00:251::/64"]}}`
	if _, err := c.Client.CoreV1().Nodes().Patch(ctx, d.Name, types.StrategicMergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	// An empty answer is asked again only after PodCIDRRetryInterval.
	time.Sleep(time.Until(asked.Add(node.PodCIDRRetryInterval)))
	daemontest.CreatePods(t, c.Client, ns, ipPod("from-cidr", d.Name))
	pod := check("from-cidr")
	if len(pod.Status.PodIPs) != 2 || pod.Status.PodIPs[0].IP != "10.251.0.2" || pod.Status.PodIPs[1].IP != "fd00:251::2" {
		t.Errorf("pod IPs %v, want the first of each of the node's pod CIDRs", pod.Status.PodIPs)
	}
}

// TestLostPodsFollowRestartPolicy kills the daemon running the in-memory
// mock, so its pods are lost, and starts it again: the restartPolicy Always
// pod runs again, its restart counted, its IP kept; the Never one fails.
func TestLostPodsFollowRestartPolicy(t *testing.T) {
	c := testcluster.Shared(t)
	ctx := context.Background()
	ns := c.Namespace(t)
	name := testcluster.UniqueName("vk")
	first := daemontest.Start(t, c, nil, "--nodename", name)
	daemontest.WaitNodeReady(t, c.Client, name)

	daemontest.CreatePods(t, c.Client, ns,
		daemontest.MockPod("always", name, corev1.RestartPolicyAlways, nil),
		daemontest.MockPod("never", name, corev1.RestartPolicyNever, nil))
	before := daemontest.WaitPod(t, c.Client, ns, "always", "Running", daemontest.Running)
	daemontest.WaitPod(t, c.Client, ns, "never", "Running", daemontest.Running)

	first.Kill()
	daemontest.CheckNoPanic(t, first)
	second := daemontest.Start(t, c, nil, "--nodename", name)

	after := daemontest.WaitPod(t, c.Client, ns, "always", "Running again with one restart", func(p *corev1.Pod) bool {
		return daemontest.Running(p) && daemontest.MainContainer(p).RestartCount == 1 && daemontest.MainContainer(p).State.Running != nil
	})
	if last := daemontest.MainContainer(after).LastTerminationState.Terminated; last == nil || last.Reason != "ContainerStatusUnknown" {
		t.Errorf("last state of the restarted container: %+v", daemontest.MainContainer(after).LastTerminationState)
	}
	if after.Status.PodIP != before.Status.PodIP {
		t.Errorf("pod IP changed from %s to %s across the restart", before.Status.PodIP, after.Status.PodIP)
	}
	failed := daemontest.WaitPod(t, c.Client, ns, "never", "Failed", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodFailed })
	if failed.Status.Reason != node.ReasonProviderLost || daemontest.MainContainer(failed).RestartCount != 0 {
		t.Errorf("never: reason %q restarts %d, want %s and 0", failed.Status.Reason, daemontest.MainContainer(failed).RestartCount, node.ReasonProviderLost)
	}
	daemontest.Eventually(t, "a ProviderLost Event on the re-created pod", func() (bool, string) {
		events, err := c.Client.CoreV1().Events(ns).List(ctx, metav1.ListOptions{FieldSelector: fields.Set{
			"involvedObject.name": "always", "reason": node.ReasonProviderLost}.String()})
		if err != nil || len(events.Items) == 0 {
			return false, fmt.Sprint(err)
		}
		return strings.Contains(events.Items[0].Message, "re-created"), events.Items[0].Message
	})
	daemontest.CheckNoPanic(t, second)
}

// TestLogsPrevious: after the mock restarts a crashing container,
// `kubectl logs --previous` shows the run before the current one.
func TestLogsPrevious(t *testing.T) {
	c := testcluster.Shared(t)
	ns := c.Namespace(t)
	d := daemontest.Start(t, c, c.AddHost(t, testcluster.UniqueName("h")))
	daemontest.WaitNodeReady(t, c.Client, d.Name)

	daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod("crashing", d.Name, corev1.RestartPolicyAlways, map[string]string{
		mock.AnnotationRunFor: "1s", mock.AnnotationExitCode: "2",
		mock.AnnotationRestartDelay: "10ms", mock.AnnotationLogInterval: "100ms",
	}))
	pod := daemontest.WaitPod(t, c.Client, ns, "crashing", "restarted", func(p *corev1.Pod) bool {
		return len(p.Status.ContainerStatuses) == 1 && daemontest.MainContainer(p).RestartCount >= 1
	})
	if last := daemontest.MainContainer(pod).LastTerminationState.Terminated; last == nil || last.ExitCode != 2 {
		t.Fatalf("last state %+v, want the exit code 2 run", daemontest.MainContainer(pod).LastTerminationState)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := c.Kubectl(ctx, "-n", ns, "logs", "crashing", "--previous")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	// The previous run ended after 1s: its log is complete, from line 1.
	if err != nil || len(lines) < 5 || len(lines) > 10 || lines[0] != ns+"/crashing/main line 1" {
		t.Errorf("kubectl logs --previous: %v, %d lines:\n%s", err, len(lines), out)
	}
	// A pod that never restarted has no previous run.
	daemontest.CreatePods(t, c.Client, ns, daemontest.MockPod("steady", d.Name, corev1.RestartPolicyAlways, nil))
	daemontest.WaitPod(t, c.Client, ns, "steady", "Running", daemontest.Running)
	if out, err := c.Kubectl(ctx, "-n", ns, "logs", "steady", "--previous"); err == nil || !strings.Contains(out, "previous terminated container") {
		t.Errorf("kubectl logs --previous of a pod that never restarted: %v\n%s", err, out)
	}
}
