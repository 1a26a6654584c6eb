//go:build e2e

package kubectl_test

import (
	"context"
	"encoding/json"
	"errors"
	"os/exec"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// TestKubectlAgainstVirtualNode is the smoke test a user would run: the
// cluster's own kubectl, through the API server, against the daemon in a
// node host, with the mock in process and behind the plugin boundary.
func TestKubectlAgainstVirtualNode(t *testing.T) {
	daemontest.ForEachTransport(t, testKubectlAgainstVirtualNode)
}

func testKubectlAgainstVirtualNode(t *testing.T, via daemontest.Transport) {
	c, ns, d := via.ReadyNode(t, true)
	ctx := context.Background()

	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Annotations: map[string]string{
			mock.AnnotationLogInterval: "100ms", mock.AnnotationCPUUsage: "250m", mock.AnnotationMemoryUsage: "64Mi",
		}},
		Spec: corev1.PodSpec{
			NodeName: d.Name, Tolerations: daemontest.Tolerate,
			Containers: []corev1.Container{{
				Name: "app", Image: "nginx",
				Env:   []corev1.EnvVar{{Name: "GREETING", Value: "hello"}},
				Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
			}},
		},
	}
	if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, pod, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	daemontest.WaitPod(t, c.Client, ns, "web", "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	time.Sleep(500 * time.Millisecond) // a few log lines

	kubectl := func(stdin string, args ...string) (string, error) { return kubectlIn(c, ns, stdin, args...) }

	out, err := kubectl("", "logs", "web", "--tail=2")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if err != nil || len(lines) != 2 || !strings.HasPrefix(lines[0], ns+"/web/app line ") {
		t.Errorf("kubectl logs --tail=2: %v\n%s", err, out)
	}
	out, err = kubectl("", "logs", "web", "--timestamps", "--limit-bytes=40")
	if err != nil || len(out) != 40 || !strings.HasPrefix(out, time.Now().UTC().Format("2006-01-02T")) {
		t.Errorf("kubectl logs --timestamps --limit-bytes=40: %v %q", err, out)
	}
	out, err = kubectl("", "exec", "web", "--", "printenv", "GREETING")
	if err != nil || out != "hello\n" {
		t.Errorf("kubectl exec printenv: %v %q", err, out)
	}
	out, err = kubectl("from stdin\n", "exec", "-i", "web", "--", "cat")
	if err != nil || out != "from stdin\n" {
		t.Errorf("kubectl exec -i cat: %v %q", err, out)
	}
	out, err = kubectl("", "exec", "web", "--", "sh", "-c", "exit 42")
	var exitErr *exec.ExitError
	if !errors.As(err, &exitErr) || exitErr.ExitCode() != 42 || !strings.Contains(out, "exit code 42") {
		t.Errorf("kubectl exec exit 42: %v %q", err, out)
	}
	out, err = kubectl("", "logs", "web", "-c", "nope")
	if err == nil || !strings.Contains(out, "nope") {
		t.Errorf("logs of an unknown container must fail naming it: %v %q", err, out)
	}

	// kubectl port-forward to the mock's echo server on 8080.
	if echo, err := daemontest.PortForwardEcho(t, c, ns, "web", 8080, "ping through port-forward\n"); err != nil || echo != "ping through port-forward\n" {
		t.Errorf("port-forward echo: %v %q", err, echo)
	}

	// Stats through the API server's node proxy, as metrics-server reads them.
	raw, err := kubectl("", "get", "--raw", "/api/v1/nodes/"+d.Name+"/proxy/stats/summary")
	var summary statsv1alpha1.Summary
	if err != nil || json.Unmarshal([]byte(raw), &summary) != nil {
		t.Fatalf("stats/summary: %v %q", err, raw)
	}
	if summary.Node.NodeName != d.Name || len(summary.Pods) != 1 || *summary.Pods[0].CPU.UsageNanoCores != 250_000_000 {
		t.Errorf("stats/summary: %+v", summary)
	}
	metrics, err := kubectl("", "get", "--raw", "/api/v1/nodes/"+d.Name+"/proxy/metrics/resource")
	if err != nil || !strings.Contains(metrics, `container_memory_working_set_bytes{container="app",namespace="`+ns+`",pod="web"} 6.7108864e+07`) {
		t.Errorf("metrics/resource: %v\n%s", err, metrics)
	}
}
