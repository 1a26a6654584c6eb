// Package e2e is the end-to-end suite a provider's own repository runs
// against its virtual node on a real cluster: the node the provider serves
// must already be registered (the suite does not start the daemon), and the
// suite drives it through the API server as users do: pods bound to the
// node, status as the provider reports it, and the kubelet API
// (/pods, /stats/summary, /metrics/resource, logs, exec) through the API
// server's node proxy.
//
// The suite keeps the prior project's shape (EndToEndTestSuite, its config
// and test names), so a provider that ran that suite moves here with an
// import rewrite; the tests past those names check more of the contract.
// A provider declares what it does not support through ShouldSkipTest.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/test/poll"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
)

// SetUpFunc prepares what the provider needs before the suite runs.
type SetUpFunc func() error

// TeardownFunc undoes SetUpFunc after the suite.
type TeardownFunc func() error

// ShouldSkipTestFunc reports whether the named test is to be skipped: what
// the provider declares it does not support.
type ShouldSkipTestFunc func(testName string) bool

// EndToEndTestSuiteConfig says where the node under test is and how to
// make pods it can run.
type EndToEndTestSuiteConfig struct {
	// Kubeconfig is the path of a kubeconfig for the cluster; empty means
	// $KUBECONFIG. RestConfig, when set, is used instead.
	Kubeconfig string
	RestConfig *rest.Config
	// Namespace is where the suite's pods go; it must exist. Empty: the
	// suite creates a namespace of its own and deletes it afterwards.
	Namespace string
	// NodeName is the virtual node under test.
	NodeName string
	// WatchTimeout bounds every wait of the suite (pod Running, gone, ...);
	// zero means two minutes.
	WatchTimeout time.Duration

	Setup          SetUpFunc
	Teardown       TeardownFunc
	ShouldSkipTest ShouldSkipTestFunc

	// Container is the container of every pod the suite creates; the
	// suite sets its name. Its zero value runs image busybox with
	// `sh -c 'while :; do echo <LogLine>; sleep 1; done'`.
	Container corev1.Container
	// PodAnnotations are added to every pod (a provider's scripting
	// annotations, a backend's placement hints).
	PodAnnotations map[string]string
	// WantLog, given a pod's namespace and name, is a line its container's
	// log must hold once it runs (and attach must stream); nil means
	// LogLine.
	WantLog func(namespace, pod string) string
	// EchoPort is a port on which the suite's container echoes what it
	// receives; the suite declares it on the container. Zero skips
	// TestPortForward: the container serves nothing to forward to.
	EchoPort int32
	// Restart restarts the provider's daemon (or the provider) and returns
	// once it is started again; nil skips TestRestartAdoption.
	Restart func(ctx context.Context) error
}

// LogLine is what the default container writes, once a second.
const LogLine = "virtual-kubelet e2e: running"

// containerName is the name of the one container of the suite's pods.
const containerName = "main"

// EndToEndTestSuite runs the contract's tests against one node. Build it
// with NewEndToEndTestSuite.
type EndToEndTestSuite struct {
	cfg     EndToEndTestSuiteConfig
	rest    *rest.Config
	client  kubernetes.Interface
	ns      string
	timeout time.Duration
}

// NewEndToEndTestSuite returns the suite for cfg; Setup connects to the
// cluster.
func NewEndToEndTestSuite(cfg EndToEndTestSuiteConfig) *EndToEndTestSuite {
	timeout := cfg.WatchTimeout
	if timeout <= 0 {
		timeout = 2 * time.Minute
	}
	if cfg.Container.Image == "" && len(cfg.Container.Command) == 0 {
		cfg.Container = corev1.Container{Image: "busybox", Command: []string{"sh", "-c", "while :; do echo '" + LogLine + "'; sleep 1; done"}}
	}
	if cfg.WantLog == nil {
		cfg.WantLog = func(string, string) string { return LogLine }
	}
	return &EndToEndTestSuite{cfg: cfg, timeout: timeout}
}

// tests are the suite's tests in the order Run runs them.
func (ts *EndToEndTestSuite) tests() []struct {
	name string
	run  func(*testing.T)
} {
	return []struct {
		name string
		run  func(*testing.T)
	}{
		{"TestGetPods", ts.TestGetPods},
		{"TestGetStatsSummary", ts.TestGetStatsSummary},
		{"TestGetMetricsResource", ts.TestGetMetricsResource},
		{"TestPodLifecycleGracefulDelete", ts.TestPodLifecycleGracefulDelete},
		{"TestPodLifecycleForceDelete", ts.TestPodLifecycleForceDelete},
		{"TestCreatePodWithOptionalInexistentSecrets", ts.TestCreatePodWithOptionalInexistentSecrets},
		{"TestCreatePodWithOptionalInexistentConfigMap", ts.TestCreatePodWithOptionalInexistentConfigMap},
		{"TestCreatePodWithMandatoryInexistentSecrets", ts.TestCreatePodWithMandatoryInexistentSecrets},
		{"TestCreatePodWithMandatoryInexistentConfigMap", ts.TestCreatePodWithMandatoryInexistentConfigMap},
		{"TestContainerLogs", ts.TestContainerLogs},
		{"TestExec", ts.TestExec},
		{"TestAttach", ts.TestAttach},
		{"TestPortForward", ts.TestPortForward},
		{"TestPodDeleteWithinGrace", ts.TestPodDeleteWithinGrace},
		{"TestEnvReferenceEvents", ts.TestEnvReferenceEvents},
		{"TestRestartAdoption", ts.TestRestartAdoption},
		{"TestDynamicResourceAllocation", ts.TestDynamicResourceAllocation},
	}
}

// Run sets up, runs every test ShouldSkipTest does not skip as a subtest
// of t, and tears down.
func (ts *EndToEndTestSuite) Run(t *testing.T) {
	ts.Setup(t)
	defer ts.Teardown()
	for _, tc := range ts.tests() {
		t.Run(tc.name, func(t *testing.T) {
			if ts.ShouldSkipTest(tc.name) {
				t.Skipf("%s: the provider declares it unsupported", tc.name)
			}
			tc.run(t)
		})
	}
}

// Setup runs the config's Setup, connects to the cluster, makes the
// namespace when the config names none and waits for the node to be Ready.
func (ts *EndToEndTestSuite) Setup(t *testing.T) {
	t.Helper()
	if ts.cfg.NodeName == "" {
		t.Fatal("e2e suite: EndToEndTestSuiteConfig.NodeName is empty: name the virtual node under test")
	}
	if ts.cfg.Setup != nil {
		if err := ts.cfg.Setup(); err != nil {
			t.Fatalf("e2e suite: setup: %v", err)
		}
	}
	ts.rest = ts.cfg.RestConfig
	if ts.rest == nil {
		path := ts.cfg.Kubeconfig
		if path == "" {
			path = os.Getenv("KUBECONFIG")
		}
		cfg, err := clientcmd.BuildConfigFromFlags("", path)
		if err != nil {
			t.Fatalf("e2e suite: kubeconfig %q: %v", path, err)
		}
		ts.rest = cfg
	}
	client, err := kubernetes.NewForConfig(ts.rest)
	if err != nil {
		t.Fatalf("e2e suite: %v", err)
	}
	ts.client = client
	ctx := context.Background()
	ts.ns = ts.cfg.Namespace
	if ts.ns == "" {
		ns, err := client.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "vk-e2e-"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatalf("e2e suite: creating a namespace: %v", err)
		}
		ts.ns = ns.Name
	}
	ts.eventually(t, "node "+ts.cfg.NodeName+" Ready", func() (bool, string) {
		n, err := client.CoreV1().Nodes().Get(ctx, ts.cfg.NodeName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		for _, c := range n.Status.Conditions {
			if c.Type == corev1.NodeReady {
				return c.Status == corev1.ConditionTrue, fmt.Sprintf("Ready=%s %s", c.Status, c.Message)
			}
		}
		return false, "no Ready condition"
	})
}

// Teardown deletes the namespace the suite made and runs the config's
// Teardown.
func (ts *EndToEndTestSuite) Teardown() {
	if ts.cfg.Namespace == "" && ts.ns != "" {
		_ = ts.client.CoreV1().Namespaces().Delete(context.Background(), ts.ns, metav1.DeleteOptions{})
	}
	if ts.cfg.Teardown != nil {
		_ = ts.cfg.Teardown()
	}
}

// ShouldSkipTest reports whether the config skips the named test.
func (ts *EndToEndTestSuite) ShouldSkipTest(testName string) bool {
	return ts.cfg.ShouldSkipTest != nil && ts.cfg.ShouldSkipTest(testName)
}

// newPod is a pod of the suite bound to the node under test, tolerating
// any taint the node carries.
func (ts *EndToEndTestSuite) newPod(prefix string) *corev1.Pod {
	c := *ts.cfg.Container.DeepCopy()
	c.Name = containerName
	if ts.cfg.EchoPort != 0 {
		c.Ports = append(c.Ports, corev1.ContainerPort{Name: "echo", ContainerPort: ts.cfg.EchoPort, Protocol: corev1.ProtocolTCP})
	}
	annotations := map[string]string{}
	for k, v := range ts.cfg.PodAnnotations {
		annotations[k] = v
	}
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: prefix + "-" + rand.String(6), Namespace: ts.ns, Annotations: annotations},
		Spec: corev1.PodSpec{
			NodeName:      ts.cfg.NodeName,
			Containers:    []corev1.Container{c},
			Tolerations:   []corev1.Toleration{{Operator: corev1.TolerationOpExists}},
			RestartPolicy: corev1.RestartPolicyAlways,
			// A shell as the container's first process ignores TERM, as
			// on a kubelet: keep the graceful waits short.
			TerminationGracePeriodSeconds: ptr.To[int64](5),
		},
	}
}

// create creates pod and returns it as the API server stored it.
func (ts *EndToEndTestSuite) create(t *testing.T, pod *corev1.Pod) *corev1.Pod {
	t.Helper()
	got, err := ts.client.CoreV1().Pods(ts.ns).Create(context.Background(), pod, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("creating pod %s: %v", pod.Name, err)
	}
	return got
}

// runningPod creates a pod of the suite and waits until it is Running.
func (ts *EndToEndTestSuite) runningPod(t *testing.T, prefix string) *corev1.Pod {
	t.Helper()
	pod := ts.create(t, ts.newPod(prefix))
	return ts.waitPod(t, pod.Name, "Running ("+RuleStatusReported+")", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodRunning })
}

// waitPod waits until cond holds for the pod and returns it.
func (ts *EndToEndTestSuite) waitPod(t *testing.T, name, what string, cond func(*corev1.Pod) bool) *corev1.Pod {
	t.Helper()
	return poll.Pod(t, ts.client, ts.timeout, ts.ns, name, what, cond)
}

// waitGone waits until the pod is no longer in the API server.
func (ts *EndToEndTestSuite) waitGone(t *testing.T, name string) {
	t.Helper()
	ts.eventually(t, "pod "+name+" gone", func() (bool, string) {
		p, err := ts.client.CoreV1().Pods(ts.ns).Get(context.Background(), name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return true, ""
		}
		if err != nil {
			return false, err.Error()
		}
		return false, fmt.Sprintf("still there: phase %s, deletionTimestamp %v", p.Status.Phase, p.DeletionTimestamp)
	})
}

// eventually polls cond until it holds or the suite's timeout passes, then
// fails naming what was awaited and what cond said last.
func (ts *EndToEndTestSuite) eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	poll.Until(t, ts.timeout, what, cond)
}

// nodeProxy GETs a path of the node's kubelet API through the API server.
func (ts *EndToEndTestSuite) nodeProxy(path string) ([]byte, error) {
	return ts.client.CoreV1().RESTClient().Get().AbsPath("/api/v1/nodes", ts.cfg.NodeName, "proxy", path).DoRaw(context.Background())
}
