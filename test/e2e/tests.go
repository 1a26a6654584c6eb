package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/url"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/exec"
	"k8s.io/utils/ptr"
)

// TestGetPods checks that a Running pod is in the node's /pods, as the provider
// reports it.
func (ts *EndToEndTestSuite) TestGetPods(t *testing.T) {
	pod := ts.runningPod(t, "get-pods")
	defer ts.deleteNow(pod.Name)
	ts.eventually(t, "pod "+pod.Name+" in the node's /pods", func() (bool, string) {
		return ts.providerHas(pod)
	})
}

// providerHas reports whether the node's /pods lists the pod.
func (ts *EndToEndTestSuite) providerHas(pod *corev1.Pod) (bool, string) {
	p, msg := ts.providerPod(pod)
	return p != nil, msg
}

// providerPod is the pod as the node's /pods lists it, nil if it does not;
// a pod listed twice is reported as an error.
func (ts *EndToEndTestSuite) providerPod(pod *corev1.Pod) (*corev1.Pod, string) {
	raw, err := ts.nodeProxy("pods")
	if err != nil {
		return nil, err.Error()
	}
	var list corev1.PodList
	if err := json.Unmarshal(raw, &list); err != nil {
		return nil, "/pods is not a PodList: " + err.Error()
	}
	var found *corev1.Pod
	for i, p := range list.Items {
		if p.Namespace != pod.Namespace || p.Name != pod.Name {
			continue
		}
		if found != nil {
			return nil, "/pods lists it twice"
		}
		if p.UID == pod.UID {
			found = &list.Items[i]
		}
	}
	if found == nil {
		return nil, "/pods does not list it"
	}
	return found, ""
}

// TestGetStatsSummary checks that /stats/summary names the node and has the Running
// pod's stats.
func (ts *EndToEndTestSuite) TestGetStatsSummary(t *testing.T) {
	pod := ts.runningPod(t, "stats")
	defer ts.deleteNow(pod.Name)
	ts.eventually(t, "pod "+pod.Name+" in /stats/summary", func() (bool, string) {
		raw, err := ts.nodeProxy("stats/summary")
		if err != nil {
			return false, err.Error()
		}
		var s statsv1alpha1.Summary
		if err := json.Unmarshal(raw, &s); err != nil {
			return false, "/stats/summary is not a Summary: " + err.Error()
		}
		if s.Node.NodeName != ts.cfg.NodeName {
			t.Fatalf("/stats/summary is for node %q, want %q", s.Node.NodeName, ts.cfg.NodeName)
		}
		for _, p := range s.Pods {
			if p.PodRef.UID == string(pod.UID) {
				return p.PodRef.Name == pod.Name && p.PodRef.Namespace == pod.Namespace, string(raw)
			}
		}
		return false, string(raw)
	})
}

// TestGetMetricsResource checks that /metrics/resource has the node's CPU and memory,
// the samples metrics-server reads.
func (ts *EndToEndTestSuite) TestGetMetricsResource(t *testing.T) {
	raw, err := ts.nodeProxy("metrics/resource")
	if err != nil {
		t.Fatalf("/metrics/resource: %v", err)
	}
	for _, m := range []string{"node_cpu_usage_seconds_total", "node_memory_working_set_bytes"} {
		if !bytes.Contains(raw, []byte("\n"+m+" ")) && !bytes.HasPrefix(raw, []byte(m+" ")) {
			t.Errorf("/metrics/resource has no %s sample:\n%s", m, raw)
		}
	}
}

// TestPodLifecycleGracefulDelete checks that a Running pod deleted with its grace
// period leaves the API server and the provider.
func (ts *EndToEndTestSuite) TestPodLifecycleGracefulDelete(t *testing.T) {
	pod := ts.runningPod(t, "graceful")
	if err := ts.client.CoreV1().Pods(ts.ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	ts.waitGone(t, pod.Name)
	ts.eventually(t, "the provider to forget pod "+pod.Name+" ("+RuleDeleteForgets+")", func() (bool, string) {
		has, msg := ts.providerHas(pod)
		return !has && !strings.HasPrefix(msg, "/pods is not"), msg
	})
}

// TestPodLifecycleForceDelete checks that a Running pod force-deleted (grace 0) is
// gone from the API server at once, and the provider is told: it no longer
// lists the pod.
func (ts *EndToEndTestSuite) TestPodLifecycleForceDelete(t *testing.T) {
	pod := ts.runningPod(t, "force")
	ts.deleteNow(pod.Name)
	ts.waitGone(t, pod.Name)
	ts.eventually(t, "the provider to forget force-deleted pod "+pod.Name+" ("+RuleDeleteForgets+")", func() (bool, string) {
		has, msg := ts.providerHas(pod)
		return !has && !strings.HasPrefix(msg, "/pods is not"), msg
	})
}

// deleteNow deletes a pod of the suite with grace 0.
func (ts *EndToEndTestSuite) deleteNow(name string) {
	_ = ts.client.CoreV1().Pods(ts.ns).Delete(context.Background(), name, metav1.DeleteOptions{GracePeriodSeconds: ptr.To[int64](0)})
}

// missingRef is an env var of a ConfigMap or Secret that does not exist.
func missingRef(kind string, optional bool) corev1.EnvVar {
	ref := corev1.LocalObjectReference{Name: "vk-e2e-missing"}
	src := &corev1.EnvVarSource{}
	if kind == "ConfigMap" {
		src.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{LocalObjectReference: ref, Key: "k", Optional: ptr.To(optional)}
	} else {
		src.SecretKeyRef = &corev1.SecretKeySelector{LocalObjectReference: ref, Key: "k", Optional: ptr.To(optional)}
	}
	return corev1.EnvVar{Name: "FROM_MISSING", ValueFrom: src}
}

// optionalMissing: a pod whose env names an optional object that does not
// exist runs.
func (ts *EndToEndTestSuite) optionalMissing(t *testing.T, kind string) {
	pod := ts.newPod("optional-" + strings.ToLower(kind))
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, missingRef(kind, true))
	pod = ts.create(t, pod)
	defer ts.deleteNow(pod.Name)
	ts.waitPod(t, pod.Name, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}

// mandatoryMissing: a pod whose env names a mandatory object that does not
// exist waits with CreateContainerConfigError, as on a kubelet.
func (ts *EndToEndTestSuite) mandatoryMissing(t *testing.T, kind string) {
	pod := ts.newPod("mandatory-" + strings.ToLower(kind))
	pod.Spec.Containers[0].Env = append(pod.Spec.Containers[0].Env, missingRef(kind, false))
	pod = ts.create(t, pod)
	defer ts.deleteNow(pod.Name)
	got := ts.waitPod(t, pod.Name, "waiting with CreateContainerConfigError", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].State.Waiting != nil && cs[0].State.Waiting.Reason == "CreateContainerConfigError"
	})
	if got.Status.Phase != corev1.PodPending {
		t.Errorf("pod with a missing mandatory %s: phase %s, want Pending", kind, got.Status.Phase)
	}
}

// TestCreatePodWithOptionalInexistentSecrets runs the case optionalMissing describes.
func (ts *EndToEndTestSuite) TestCreatePodWithOptionalInexistentSecrets(t *testing.T) {
	ts.optionalMissing(t, "Secret")
}

// TestCreatePodWithOptionalInexistentConfigMap runs the case optionalMissing describes.
func (ts *EndToEndTestSuite) TestCreatePodWithOptionalInexistentConfigMap(t *testing.T) {
	ts.optionalMissing(t, "ConfigMap")
}

// TestCreatePodWithMandatoryInexistentSecrets runs the case mandatoryMissing describes.
func (ts *EndToEndTestSuite) TestCreatePodWithMandatoryInexistentSecrets(t *testing.T) {
	ts.mandatoryMissing(t, "Secret")
}

// TestCreatePodWithMandatoryInexistentConfigMap runs the case mandatoryMissing describes.
func (ts *EndToEndTestSuite) TestCreatePodWithMandatoryInexistentConfigMap(t *testing.T) {
	ts.mandatoryMissing(t, "ConfigMap")
}

// TestContainerLogs checks that the container's log, read through the API server,
// holds the config's WantLog line.
func (ts *EndToEndTestSuite) TestContainerLogs(t *testing.T) {
	pod := ts.runningPod(t, "logs")
	defer ts.deleteNow(pod.Name)
	want := ts.cfg.WantLog(pod.Namespace, pod.Name)
	ts.eventually(t, "log line "+want, func() (bool, string) {
		raw, err := ts.client.CoreV1().Pods(ts.ns).GetLogs(pod.Name, &corev1.PodLogOptions{Container: containerName}).DoRaw(context.Background())
		if err != nil {
			return false, err.Error()
		}
		return strings.Contains(string(raw), want), string(raw)
	})
}

// TestExec checks that a command run through the API server's exec (over WebSocket,
// falling back to SPDY, as kubectl does) returns its output, and a
// failing command its exit code.
func (ts *EndToEndTestSuite) TestExec(t *testing.T) {
	pod := ts.runningPod(t, "exec")
	defer ts.deleteNow(pod.Name)
	out, err := ts.exec(pod.Name, "echo", "from exec")
	if err != nil || out != "from exec\n" {
		t.Errorf("exec echo: %q, %v; want %q", out, err, "from exec\n")
	}
	_, err = ts.exec(pod.Name, "false")
	var exit exec.ExitError
	if !errors.As(err, &exit) || exit.ExitStatus() != 1 {
		t.Errorf("exec false: %v, want exit code 1", err)
	}
}

// exec runs cmd in the suite's container of the pod and returns stdout.
func (ts *EndToEndTestSuite) exec(pod string, cmd ...string) (string, error) {
	req := ts.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ts.ns).Name(pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: containerName, Command: cmd, Stdout: true, Stderr: true}, scheme.ParameterCodec)
	executor, err := ts.executor(req.URL())
	if err != nil {
		return "", err
	}
	var stdout, stderr bytes.Buffer
	err = executor.StreamWithContext(context.Background(), remotecommand.StreamOptions{Stdout: &stdout, Stderr: io.Writer(&stderr)})
	return stdout.String(), err
}

// executor streams an exec or attach request of the API server at u over
// WebSocket, falling back to SPDY, as kubectl does.
func (ts *EndToEndTestSuite) executor(u *url.URL) (remotecommand.Executor, error) {
	ws, err := remotecommand.NewWebSocketExecutor(ts.rest, http.MethodGet, u.String())
	if err != nil {
		return nil, err
	}
	spdy, err := remotecommand.NewSPDYExecutor(ts.rest, http.MethodPost, u)
	if err != nil {
		return nil, err
	}
	return remotecommand.NewFallbackExecutor(ws, spdy, httpstream.IsUpgradeFailure)
}
