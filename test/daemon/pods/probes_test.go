//go:build e2e

package pods_test

import (
	"context"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/client-go/kubernetes"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// These tests check that the probes of pods on the mock, which delegates
// them (in process, and behind the gRPC plugin boundary, where its exec
// stream runs the exec probes and KillContainer stops a container), are
// evaluated as on a kubelet: readiness takes a pod out of its
// Service and back, liveness restarts its container, startup holds
// `started` back. The mock's `probe` command answers as the pod's
// annotations script it.

// execProbe runs the mock's `probe KIND` every second, deciding at the
// first result.
func execProbe(kind string) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler:  corev1.ProbeHandler{Exec: &corev1.ExecAction{Command: []string{"probe", kind}}},
		PeriodSeconds: 1, FailureThreshold: 1, SuccessThreshold: 1,
	}
}

// endpointReady is the ready condition of pod's endpoint in the
// EndpointSlices of service, or "missing".
func endpointReady(client kubernetes.Interface, ns, service, pod string) string {
	slices, err := client.DiscoveryV1().EndpointSlices(ns).List(context.Background(),
		metav1.ListOptions{LabelSelector: discoveryv1.LabelServiceName + "=" + service})
	if err != nil {
		return err.Error()
	}
	for _, s := range slices.Items {
		for _, ep := range s.Endpoints {
			if ep.TargetRef != nil && ep.TargetRef.Name == pod && ep.Conditions.Ready != nil {
				return fmt.Sprint(*ep.Conditions.Ready)
			}
		}
	}
	return "missing"
}

// TestReadinessProbeTakesPodOutOfService: a readiness probe scripted to
// pass, fail, then pass again takes the pod's endpoint in its Service's
// EndpointSlice from ready to not ready and back, and the pod's Ready
// condition with it.
func TestReadinessProbeTakesPodOutOfService(t *testing.T) {
	daemontest.ForEachTransport(t, testReadinessProbeTakesPodOutOfService)
}

func testReadinessProbeTakesPodOutOfService(t *testing.T, via daemontest.Transport) {
	c, ns, d := via.ReadyNode(t, false)
	ctx := context.Background()

	labels := map[string]string{"app": "probed"}
	svc := &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "probed"},
		Spec:       corev1.ServiceSpec{Selector: labels, Ports: []corev1.ServicePort{{Port: 80, TargetPort: intstr.FromInt32(80)}}},
	}
	if _, err := c.Client.CoreV1().Services(ns).Create(ctx, svc, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pod := daemontest.MockPod("web", d.Name, corev1.RestartPolicyAlways, map[string]string{
		mock.AnnotationReadinessProbe: "pass-for=20s,fail-for=20s",
	})
	pod.Labels = labels
	pod.Spec.Containers[0].Ports = []corev1.ContainerPort{{ContainerPort: 80}}
	pod.Spec.Containers[0].ReadinessProbe = execProbe("readiness")
	daemontest.CreatePods(t, c.Client, ns, pod)

	for _, want := range []string{"true", "false", "true"} {
		daemontest.Eventually(t, "endpoint of web ready="+want, func() (bool, string) {
			got := endpointReady(c.Client, ns, "probed", "web")
			return got == want, got
		})
		p := daemontest.WaitPod(t, c.Client, ns, "web", "Ready="+want, func(p *corev1.Pod) bool {
			return daemontest.Running(p) && podCondition(p, corev1.PodReady) == want
		})
		if daemontest.MainContainer(p).RestartCount != 0 {
			t.Errorf("a readiness probe restarted the container: %+v", daemontest.MainContainer(p))
		}
	}
	waitEvent(t, c.Client, ns, "web", node.ReasonUnhealthy)
	daemontest.CheckNoPanic(t, d)
}

// TestLivenessProbeRestartsContainer: a liveness probe scripted to fail
// after 5 s has the container killed and started again (restartCount 1,
// last state terminated with exit code 137) while the pod stays Running.
func TestLivenessProbeRestartsContainer(t *testing.T) {
	daemontest.ForEachTransport(t, testLivenessProbeRestartsContainer)
}

func testLivenessProbeRestartsContainer(t *testing.T, via daemontest.Transport) {
	c, ns, d := via.ReadyNode(t, false)

	pod := daemontest.MockPod("alive", d.Name, corev1.RestartPolicyAlways, map[string]string{
		mock.AnnotationLivenessProbe: "fail-after=5s",
	})
	pod.Spec.Containers[0].LivenessProbe = execProbe("liveness")
	daemontest.CreatePods(t, c.Client, ns, pod)

	daemontest.WaitPod(t, c.Client, ns, "alive", "Running", daemontest.Running)
	p := daemontest.WaitPod(t, c.Client, ns, "alive", "running again after one restart", func(p *corev1.Pod) bool {
		cs := daemontest.MainContainer(p)
		return cs.RestartCount == 1 && cs.State.Running != nil
	})
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s after the restart, want Running", p.Status.Phase)
	}
	if last := daemontest.MainContainer(p).LastTerminationState.Terminated; last == nil || last.ExitCode != 137 {
		t.Errorf("last state after a liveness kill: %+v", daemontest.MainContainer(p).LastTerminationState)
	}
	waitEvent(t, c.Client, ns, "alive", node.ReasonKilling)
	daemontest.CheckNoPanic(t, d)
}

// TestStartupProbeHoldsStarted: a startup probe scripted to fail for 8 s
// keeps the running container's `started` (and with it `ready`, though its
// readiness probe passes) false until it passes. A probe the mock cannot
// run (HTTP: its pod IPs are in no network) is named in one Event and
// ignored.
func TestStartupProbeHoldsStarted(t *testing.T) {
	daemontest.ForEachTransport(t, testStartupProbeHoldsStarted)
}

func testStartupProbeHoldsStarted(t *testing.T, via daemontest.Transport) {
	c, ns, d := via.ReadyNode(t, false)

	slow := daemontest.MockPod("slow", d.Name, corev1.RestartPolicyAlways, map[string]string{
		mock.AnnotationStartupProbe: "fail-for=8s",
	})
	startup := execProbe("startup")
	startup.FailureThreshold = 30
	slow.Spec.Containers[0].StartupProbe = startup
	slow.Spec.Containers[0].ReadinessProbe = execProbe("readiness")
	web := daemontest.MockPod("http", d.Name, corev1.RestartPolicyAlways, nil)
	web.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{
		HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080)}}}
	daemontest.CreatePods(t, c.Client, ns, slow, web)

	daemontest.WaitPod(t, c.Client, ns, "slow", "Running, not started", func(p *corev1.Pod) bool {
		cs := daemontest.MainContainer(p)
		return daemontest.Running(p) && cs.State.Running != nil && cs.Started != nil && !*cs.Started && !cs.Ready
	})
	p := daemontest.WaitPod(t, c.Client, ns, "slow", "started and ready", func(p *corev1.Pod) bool {
		cs := daemontest.MainContainer(p)
		return cs.Started != nil && *cs.Started && cs.Ready && podCondition(p, corev1.PodReady) == "true"
	})
	if daemontest.MainContainer(p).RestartCount != 0 {
		t.Errorf("a passing startup probe restarted the container: %+v", daemontest.MainContainer(p))
	}

	daemontest.WaitPod(t, c.Client, ns, "http", "Ready (its HTTP probe ignored)", func(p *corev1.Pod) bool {
		return podCondition(p, corev1.PodReady) == "true"
	})
	ev := waitEvent(t, c.Client, ns, "http", node.ReasonProbeUnsupported)
	if ev.Count > 1 {
		t.Errorf("%d %s Events for one pod, want one: %s", ev.Count, ev.Reason, ev.Message)
	}
	daemontest.CheckNoPanic(t, d)
}

// podCondition is the status of pod's condition t, lower-cased, or "".
func podCondition(p *corev1.Pod, t corev1.PodConditionType) string {
	for _, c := range p.Status.Conditions {
		if c.Type == t {
			switch c.Status {
			case corev1.ConditionTrue:
				return "true"
			case corev1.ConditionFalse:
				return "false"
			}
		}
	}
	return ""
}

// waitEvent waits for an Event with reason on the pod and returns it.
func waitEvent(t *testing.T, client kubernetes.Interface, ns, pod, reason string) corev1.Event {
	t.Helper()
	var found corev1.Event
	daemontest.Eventually(t, fmt.Sprintf("event %s on %s", reason, pod), func() (bool, string) {
		evs, err := client.CoreV1().Events(ns).List(context.Background(), metav1.ListOptions{
			FieldSelector: "involvedObject.name=" + pod + ",reason=" + reason})
		if err != nil {
			return false, err.Error()
		}
		if len(evs.Items) == 0 {
			return false, "none"
		}
		found = evs.Items[0]
		return true, ""
	})
	return found
}
