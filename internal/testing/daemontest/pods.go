package daemontest

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// Timeout bounds each wait of Eventually and WaitPod.
const Timeout = 90 * time.Second

// Eventually polls cond until it holds, failing the test after Timeout
// with what and cond's last message.
func Eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	EventuallyWithin(t, Timeout, what, cond)
}

// EventuallyWithin is Eventually with a limit of its own.
func EventuallyWithin(t *testing.T, limit time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	poll.Until(t, limit, what, cond)
}

// WaitNodeReady waits until the Node name is Ready and returns it.
func WaitNodeReady(t *testing.T, client kubernetes.Interface, name string) *corev1.Node {
	t.Helper()
	var node *corev1.Node
	Eventually(t, "node "+name+" Ready", func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		node = n
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, string(c.Status)
			}
		}
		return false, "no Ready condition"
	})
	return node
}

// WaitPod waits until cond holds for the pod ns/name and returns it;
// what names the state waited for.
func WaitPod(t *testing.T, client kubernetes.Interface, ns, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	return poll.Pod(t, client, Timeout, ns, name, what, cond)
}

// Tolerate lets a pod onto virtual-kubelet nodes.
var Tolerate = []corev1.Toleration{{Key: "virtual-kubelet.io/provider", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoSchedule}}

// DeploymentOn is a Deployment of replicas pods labelled app=name, with the
// annotations and containers given, placed on the virtual node.
func DeploymentOn(node, name string, replicas int32, annotations map[string]string, containers ...corev1.Container) *appsv1.Deployment {
	podLabels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To(replicas),
			Selector: &metav1.LabelSelector{MatchLabels: podLabels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: annotations},
				Spec: corev1.PodSpec{
					NodeSelector: map[string]string{corev1.LabelHostname: node},
					Tolerations:  Tolerate,
					Containers:   containers,
				},
			},
		},
	}
}

// MockPod is a one-container pod for the node, scripted by ann.
func MockPod(name, node string, policy corev1.RestartPolicy, ann map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name, Annotations: ann},
		Spec: corev1.PodSpec{
			NodeName: node, RestartPolicy: policy, Tolerations: Tolerate,
			Containers: []corev1.Container{{Name: "main", Image: "busybox"}},
		},
	}
}

// CreatePods creates the pods in ns, failing the test on the first error.
func CreatePods(t *testing.T, client kubernetes.Interface, ns string, pods ...*corev1.Pod) {
	t.Helper()
	for _, p := range pods {
		if _, err := client.CoreV1().Pods(ns).Create(context.Background(), p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
}

// Running reports whether the pod's phase is Running.
func Running(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning }

// WaitGone waits until the pod no longer exists (or was replaced by another
// of the same name).
func WaitGone(t *testing.T, client kubernetes.Interface, ns, name string, uid types.UID) {
	t.Helper()
	Eventually(t, "pod "+name+" gone", PodGone(client, ns, name, uid))
}

// Metric sums the samples of the daemon's metrics whose line starts with
// prefix (a name and the start of its labels); 0 when there are none.
func Metric(metricsAddr, prefix string) (float64, error) {
	resp, err := http.Get("http://" + metricsAddr + "/metrics")
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	total := 0.0
	for s := bufio.NewScanner(resp.Body); s.Scan(); {
		if line := s.Text(); strings.HasPrefix(line, prefix) {
			v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
			if err != nil {
				return 0, fmt.Errorf("metrics line %q: %w", line, err)
			}
			total += v
		}
	}
	return total, nil
}

// ProviderCalls counts the daemon's calls of a provider method, whatever
// their result.
func ProviderCalls(t *testing.T, metricsAddr, method string) int {
	t.Helper()
	n, err := Metric(metricsAddr, fmt.Sprintf(`virtual_kubelet_provider_call_duration_seconds_count{method=%q,`, method))
	if err != nil {
		t.Fatal(err)
	}
	return int(n)
}

// CheckNoPanic fails the test if the daemon's output shows a panic or a race.
func CheckNoPanic(t *testing.T, d *Daemon) {
	t.Helper()
	if out := d.Output.String(); strings.Contains(out, "panic:") || strings.Contains(out, "DATA RACE") {
		t.Errorf("virtual-kubelet output has a panic or a data race:\n%s", out)
	}
}

// MainContainer is the status of the pod's first container, or the zero
// status before it has one.
func MainContainer(p *corev1.Pod) corev1.ContainerStatus {
	if len(p.Status.ContainerStatuses) == 0 {
		return corev1.ContainerStatus{}
	}
	return p.Status.ContainerStatuses[0]
}

// PodMatches is an outcome's condition: the pod exists and cond holds.
func PodMatches(client kubernetes.Interface, ns, name string, cond func(*corev1.Pod) bool) func() (bool, string) {
	return func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return cond(p), fmt.Sprintf("phase=%s reason=%s deleting=%v %+v", p.Status.Phase, p.Status.Reason, p.DeletionTimestamp != nil, MainContainer(p).State)
	}
}

// PodRunning is a condition for Eventually: the pod ns/name is Running.
func PodRunning(client kubernetes.Interface, ns, name string) func() (bool, string) {
	return PodMatches(client, ns, name, Running)
}

// PodGone is an outcome's condition: the pod no longer exists (or was
// replaced by another of the same name).
func PodGone(client kubernetes.Interface, ns, name string, uid types.UID) func() (bool, string) {
	return func() (bool, string) {
		p, err := client.CoreV1().Pods(ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return p.UID != uid, fmt.Sprintf("phase=%s deleting=%v %+v", p.Status.Phase, p.DeletionTimestamp != nil, MainContainer(p).State)
	}
}
