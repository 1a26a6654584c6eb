package e2e

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/httpstream"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/portforward"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/transport/spdy"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/test/poll"
)

// The rules of the provider contract the suite's failure messages name, so
// a provider's author reads which rule the provider broke, not only which
// wait timed out.
const (
	// RuleStatusReported: what the provider reports reaches the API server.
	RuleStatusReported = "contract: a pod's status reaches the API server: every status the provider reports (NotifyPods, GetPodStatus) is a new object it does not change afterwards"
	// RuleDeleteForgets: DeletePod ends the pod in the provider.
	RuleDeleteForgets = "contract: a deleted pod leaves the provider: after DeletePod it reports the pod terminal and GetPods no longer lists it"
	// RuleGrace: the provider stops a deleted pod within its grace period.
	RuleGrace = "contract: a deleted pod stops within its grace period: the provider confirms the stop itself within terminationGracePeriodSeconds + slack"
	// RuleEnvEvents: missing ConfigMap and Secret references are reported.
	RuleEnvEvents = "contract: each missing ConfigMap, Secret or key an env or envFrom refers to is a Warning event naming it"
	// RuleAdoption: a restart adopts the pods that run.
	RuleAdoption = "contract: a pod running before a restart is adopted after it, not created again"
	// RuleAttach: attach streams the container's output.
	RuleAttach = "contract: attach through the API server streams the container's output"
	// RulePortForward: port-forward reaches the container's port.
	RulePortForward = "contract: port-forward through the API server reaches the container's port"
)

// GraceSlack is how long past a deleted pod's grace period the suite waits
// for the provider to confirm the stop: the pod controller's own margin
// (node.DefaultGracePeriodMargin) and the API server's round trips.
const GraceSlack = node.DefaultGracePeriodMargin + 10*time.Second

// TestPodDeleteWithinGrace checks that a Running pod whose container ignores TERM
// (a shell as its first process) is deleted with its grace period; the
// provider confirms the stop itself, so the pod leaves the API server and
// the provider's list within the grace period and GraceSlack, and the pod
// controller never had to mark it terminated in the provider's place.
func (ts *EndToEndTestSuite) TestPodDeleteWithinGrace(t *testing.T) {
	pod := ts.runningPod(t, "grace")
	grace := time.Duration(ptr.Deref(pod.Spec.TerminationGracePeriodSeconds, 30)) * time.Second
	if err := ts.client.CoreV1().Pods(ts.ns).Delete(context.Background(), pod.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	poll.Until(t, grace+GraceSlack, fmt.Sprintf("pod %s gone from the API server and the provider within %s+%s (%s)", pod.Name, grace, GraceSlack, RuleGrace), func() (bool, string) {
		_, err := ts.client.CoreV1().Pods(ts.ns).Get(context.Background(), pod.Name, metav1.GetOptions{})
		if err == nil {
			return false, "still in the API server"
		}
		has, msg := ts.providerHas(pod)
		return !has && !strings.HasPrefix(msg, "/pods is not"), "the provider still lists it: " + msg
	})
	if reasons := ts.eventReasons(t, pod.Name); reasons[node.ReasonProviderDidNotStop] {
		t.Errorf("%s: the pod controller had to mark pod %s terminated (event %s): the provider did not report it stopped", RuleGrace, pod.Name, node.ReasonProviderDidNotStop)
	}
}

// eventReasons are the reasons of the Warning events on the named object.
func (ts *EndToEndTestSuite) eventReasons(t *testing.T, name string) map[string]bool {
	t.Helper()
	events, err := ts.client.CoreV1().Events(ts.ns).List(context.Background(), metav1.ListOptions{FieldSelector: "involvedObject.name=" + name})
	if err != nil {
		t.Fatalf("listing the events of %s: %v", name, err)
	}
	reasons := map[string]bool{}
	for _, e := range events.Items {
		if e.Type == corev1.EventTypeWarning {
			reasons[e.Reason] = true
		}
	}
	return reasons
}

// TestEnvReferenceEvents checks that each of the eight ways an env or envFrom
// reference can miss (a ConfigMap, a Secret or one of their keys; optional
// or not) is a Warning event with its reason on the pod; pods with only
// optional ones missing run, the others wait Pending.
func (ts *EndToEndTestSuite) TestEnvReferenceEvents(t *testing.T) {
	ctx := context.Background()
	suffix := rand.String(6)
	present, missing := "vk-e2e-present-"+suffix, "vk-e2e-missing-"+suffix
	cm, err := ts.client.CoreV1().ConfigMaps(ts.ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: present}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ts.client.CoreV1().ConfigMaps(ts.ns).Delete(ctx, cm.Name, metav1.DeleteOptions{}) }()
	secret, err := ts.client.CoreV1().Secrets(ts.ns).Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: present}, Data: map[string][]byte{"k": []byte("v")}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = ts.client.CoreV1().Secrets(ts.ns).Delete(ctx, secret.Name, metav1.DeleteOptions{}) }()

	// Every optional miss in one pod, which runs; a pod per mandatory miss.
	optional := ts.newPod("env-optional")
	c := &optional.Spec.Containers[0]
	c.Env = append(c.Env, keyRef("ConfigMap", missing, "k", true), keyRef("ConfigMap", present, "absent", true), keyRef("Secret", present, "absent", true))
	c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{SecretRef: &corev1.SecretEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: missing}, Optional: ptr.To(true)}})
	want := map[string]string{ // reason -> pod
		node.ReasonOptionalConfigMapNotFound:    optional.Name,
		node.ReasonOptionalConfigMapKeyNotFound: optional.Name,
		node.ReasonOptionalSecretNotFound:       optional.Name,
		node.ReasonOptionalSecretKeyNotFound:    optional.Name,
	}
	mandatory := map[string]func(*corev1.Container){
		node.ReasonMandatoryConfigMapNotFound: func(c *corev1.Container) {
			c.EnvFrom = append(c.EnvFrom, corev1.EnvFromSource{ConfigMapRef: &corev1.ConfigMapEnvSource{LocalObjectReference: corev1.LocalObjectReference{Name: missing}}})
		},
		node.ReasonMandatoryConfigMapKeyNotFound: func(c *corev1.Container) { c.Env = append(c.Env, keyRef("ConfigMap", present, "absent", false)) },
		node.ReasonMandatorySecretNotFound:       func(c *corev1.Container) { c.Env = append(c.Env, keyRef("Secret", missing, "k", false)) },
		node.ReasonMandatorySecretKeyNotFound:    func(c *corev1.Container) { c.Env = append(c.Env, keyRef("Secret", present, "absent", false)) },
	}
	pods := []*corev1.Pod{optional}
	for reason, edit := range mandatory {
		p := ts.newPod("env-" + strings.ToLower(reason))
		edit(&p.Spec.Containers[0])
		want[reason] = p.Name
		pods = append(pods, p)
	}
	for _, p := range pods {
		ts.create(t, p)
		defer ts.deleteNow(p.Name)
	}

	ts.waitPod(t, optional.Name, "Running with only optional references missing", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	var missed []string
	ts.eventually(t, "the eight env reference events ("+RuleEnvEvents+")", func() (bool, string) {
		missed = missed[:0]
		seen := map[string]map[string]bool{}
		for reason, pod := range want {
			if seen[pod] == nil {
				seen[pod] = ts.eventReasons(t, pod)
			}
			if !seen[pod][reason] {
				missed = append(missed, reason+" on "+pod)
			}
		}
		return len(missed) == 0, fmt.Sprintf("missing: %v", missed)
	})
	for reason, name := range want {
		if name == optional.Name {
			continue
		}
		got, err := ts.client.CoreV1().Pods(ts.ns).Get(ctx, name, metav1.GetOptions{})
		if err != nil || got.Status.Phase != corev1.PodPending {
			t.Errorf("pod %s (%s): %v, want Pending", name, reason, phaseOf(got, err))
		}
	}
}

// phaseOf describes a pod's phase, or the error getting it.
func phaseOf(p *corev1.Pod, err error) string {
	if err != nil {
		return err.Error()
	}
	return "phase " + string(p.Status.Phase)
}

// keyRef is an env var from key of the named ConfigMap or Secret.
func keyRef(kind, name, key string, optional bool) corev1.EnvVar {
	ref := corev1.LocalObjectReference{Name: name}
	src := &corev1.EnvVarSource{}
	if kind == "ConfigMap" {
		src.ConfigMapKeyRef = &corev1.ConfigMapKeySelector{LocalObjectReference: ref, Key: key, Optional: ptr.To(optional)}
	} else {
		src.SecretKeyRef = &corev1.SecretKeySelector{LocalObjectReference: ref, Key: key, Optional: ptr.To(optional)}
	}
	return corev1.EnvVar{Name: strings.ToUpper(kind) + "_" + strings.ToUpper(key), ValueFrom: src}
}

// TestRestartAdoption checks that a Running pod survives a restart of the provider's
// daemon as the same pod: once the restarted daemon serves the node the
// provider lists it once, with the container it had (same start time, no
// restart), and the API server has the same pod. Skipped without the
// config's Restart.
func (ts *EndToEndTestSuite) TestRestartAdoption(t *testing.T) {
	if ts.cfg.Restart == nil {
		t.Skip("the config has no Restart hook")
	}
	pod := ts.runningPod(t, "adopt")
	defer ts.deleteNow(pod.Name)
	var before *corev1.Pod
	ts.eventually(t, "pod "+pod.Name+" in the node's /pods with a running container", func() (bool, string) {
		p, msg := ts.providerPod(pod)
		before = p
		return p != nil && runningSince(p) != nil, msg
	})
	ctx, cancel := context.WithTimeout(context.Background(), ts.timeout)
	defer cancel()
	if err := ts.cfg.Restart(ctx); err != nil {
		t.Fatalf("restarting the provider: %v", err)
	}
	var after *corev1.Pod
	ts.eventually(t, "the restarted node's /pods to list pod "+pod.Name+" ("+RuleAdoption+")", func() (bool, string) {
		p, msg := ts.providerPod(pod)
		after = p
		return p != nil && runningSince(p) != nil, msg
	})
	if was, is := runningSince(before), runningSince(after); !was.Equal(is) {
		t.Errorf("%s: pod %s's container started at %v before the restart, at %v after: created again", RuleAdoption, pod.Name, was, is)
	}
	got := ts.waitPod(t, pod.Name, "Running", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
	if got.UID != pod.UID {
		t.Errorf("%s: pod %s has UID %s after the restart, want %s", RuleAdoption, pod.Name, got.UID, pod.UID)
	}
	for _, cs := range got.Status.ContainerStatuses {
		if cs.RestartCount != 0 {
			t.Errorf("%s: container %s of pod %s restarted %d times across the restart", RuleAdoption, cs.Name, pod.Name, cs.RestartCount)
		}
	}
}

// runningSince is when the suite's container of p started running, nil
// if it is not running.
func runningSince(p *corev1.Pod) *metav1.Time {
	if p == nil {
		return nil
	}
	for _, cs := range p.Status.ContainerStatuses {
		if cs.Name == containerName && cs.State.Running != nil {
			return &cs.State.Running.StartedAt
		}
	}
	return nil
}

// TestAttach checks that attaching to the container's output through the API server
// (over WebSocket, falling back to SPDY) streams its log line.
func (ts *EndToEndTestSuite) TestAttach(t *testing.T) {
	pod := ts.runningPod(t, "attach")
	defer ts.deleteNow(pod.Name)
	want := ts.cfg.WantLog(pod.Namespace, pod.Name)
	req := ts.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ts.ns).Name(pod.Name).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: containerName, Stdout: true}, scheme.ParameterCodec)
	executor, err := ts.executor(req.URL())
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), ts.timeout)
	defer cancel()
	out := &awaitWriter{want: want, found: make(chan struct{})}
	errc := make(chan error, 1)
	go func() { errc <- executor.StreamWithContext(ctx, remotecommand.StreamOptions{Stdout: out}) }()
	select {
	case <-out.found:
		cancel()
		_ = <-errc // ended by the cancel above
	case err := <-errc:
		t.Fatalf("%s: attach ended (%v) before %q; got %q", RuleAttach, err, want, out.String())
	}
}

// awaitWriter collects what is written and closes found once it holds want.
type awaitWriter struct {
	want  string
	found chan struct{}
	mu    sync.Mutex
	b     bytes.Buffer
	once  sync.Once
}

func (w *awaitWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.b.Write(p)
	if strings.Contains(w.b.String(), w.want) {
		w.once.Do(func() { close(w.found) })
	}
	return len(p), nil
}

func (w *awaitWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.b.String()
}

// TestPortForward checks that a connection forwarded through the API server to the
// config's EchoPort gets back what it sends. Skipped without EchoPort.
func (ts *EndToEndTestSuite) TestPortForward(t *testing.T) {
	if ts.cfg.EchoPort == 0 {
		t.Skip("the config has no EchoPort")
	}
	pod := ts.runningPod(t, "forward")
	defer ts.deleteNow(pod.Name)
	url := ts.client.CoreV1().RESTClient().Post().Resource("pods").Namespace(ts.ns).Name(pod.Name).SubResource("portforward").URL()
	rt, upgrader, err := spdy.RoundTripperFor(ts.rest)
	if err != nil {
		t.Fatal(err)
	}
	spdyDialer := spdy.NewDialer(upgrader, &http.Client{Transport: rt}, http.MethodPost, url)
	wsDialer, err := portforward.NewSPDYOverWebsocketDialer(url, ts.rest)
	if err != nil {
		t.Fatal(err)
	}
	dialer := portforward.NewFallbackDialer(wsDialer, spdyDialer, func(err error) bool { return httpstream.IsUpgradeFailure(err) || httpstream.IsHTTPSProxyError(err) })
	stop, ready := make(chan struct{}), make(chan struct{})
	defer close(stop)
	fw, err := portforward.NewOnAddresses(dialer, []string{"127.0.0.1"}, []string{fmt.Sprintf("0:%d", ts.cfg.EchoPort)}, stop, ready, io.Discard, io.Discard)
	if err != nil {
		t.Fatal(err)
	}
	errc := make(chan error, 1)
	go func() { errc <- fw.ForwardPorts() }()
	select {
	case <-ready:
	case err := <-errc:
		t.Fatalf("%s: %v", RulePortForward, err)
	case <-time.After(ts.timeout):
		t.Fatalf("%s: the forward was not ready within %s", RulePortForward, ts.timeout)
	}
	ports, err := fw.GetPorts()
	if err != nil || len(ports) != 1 {
		t.Fatalf("forwarded ports: %v %v", ports, err)
	}
	conn, err := net.DialTimeout("tcp", fmt.Sprintf("127.0.0.1:%d", ports[0].Local), ts.timeout)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	_ = conn.SetDeadline(time.Now().Add(ts.timeout))
	const line = "through port-forward\n"
	if _, err := io.WriteString(conn, line); err != nil {
		t.Fatalf("%s: writing: %v", RulePortForward, err)
	}
	got, err := bufio.NewReader(conn).ReadString('\n')
	if got != line {
		t.Errorf("%s: port %d echoed %q (%v), want %q", RulePortForward, ts.cfg.EchoPort, got, err, line)
	}
}
