//go:build e2e

package api_test

import (
	"bufio"
	"context"
	"crypto/tls"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/wait"
	"k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/remotecommand"
	"k8s.io/client-go/util/cert"
	"k8s.io/client-go/util/retry"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"
	"k8s.io/utils/ptr"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testcluster"
	"github.com/vkubelet/virtual-kubelet/node/api"
)

func TestMain(m *testing.M) { testcluster.Main(m) }

// e2eEnv is a kubelet API server in a node host, serving a fake provider
// behind NewAuth, registered as a Node with one pod bound to it.
type e2eEnv struct {
	c    *testcluster.Cluster
	f    *fakeProvider
	ns   string
	node string
	pod  string
	// base is the server's URL, for calling it directly.
	base string

	mu sync.Mutex
	// upgrades records the upgrade requests the server got, as
	// "UPGRADE PROTOCOLS", to tell WebSocket from SPDY.
	upgrades []string
}

// record notes the upgrade requests that reach the server.
func (e *e2eEnv) record(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if up := r.Header.Get("Upgrade"); up != "" {
			protocols := r.Header.Get("Sec-Websocket-Protocol") + r.Header.Get("X-Stream-Protocol-Version")
			e.mu.Lock()
			e.upgrades = append(e.upgrades, strings.ToLower(up)+" "+protocols)
			e.mu.Unlock()
		}
		h.ServeHTTP(w, r)
	})
}

// takeUpgrades returns and forgets the upgrades recorded so far.
func (e *e2eEnv) takeUpgrades() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	u := e.upgrades
	e.upgrades = nil
	return u
}

// checkUpgrades checks that every upgrade since the last call was of the
// given kind ("websocket" or "spdy/3.1") with a protocol containing proto.
func (e *e2eEnv) checkUpgrades(t *testing.T, kind, proto string) {
	t.Helper()
	ups := e.takeUpgrades()
	if len(ups) == 0 {
		t.Errorf("no upgrade request reached the node")
	}
	for _, u := range ups {
		if !strings.HasPrefix(u, kind+" ") || !strings.Contains(u, proto) {
			t.Errorf("upgrade %q reached the node, want %s with %s", u, kind, proto)
		}
	}
}

// The feature a node declares for the apiserver to proxy WebSocket exec,
// attach and port-forward to it as they are, instead of translating them
// to SPDY.
const extendWebSocketsToKubelet = "ExtendWebSocketsToKubelet"

func newE2EEnv(t *testing.T, declaredFeatures ...string) *e2eEnv {
	t.Helper()
	c := testcluster.Shared(t)
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	host := c.AddHost(t, testcluster.UniqueName("vkapi"))
	ns := c.Namespace(t)
	nodeName := testcluster.UniqueName("vkapi")
	env := &e2eEnv{c: c, f: newFakeProvider(), ns: ns, node: nodeName, pod: "web"}

	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey(host.Addr.String(), nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	auth, err := api.NewAuth(ctx, api.AuthConfig{
		ClientCAFile:              c.Info.CAFile,
		TokenReviewClient:         c.Client.AuthenticationV1(),
		SubjectAccessReviewClient: c.Client.AuthorizationV1(),
		NodeName:                  nodeName,
	})
	if err != nil {
		t.Fatal(err)
	}
	l, err := host.Listen(0)
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler:   env.record(api.WithAuth(api.PodHandler(env.f.config(), true), auth)),
		TLSConfig: &tls.Config{Certificates: []tls.Certificate{pair}, ClientAuth: tls.RequestClientCert},
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })
	port := l.Addr().(*net.TCPAddr).Port
	env.base = fmt.Sprintf("https://%s", net.JoinHostPort(host.Addr.String(), fmt.Sprint(port)))

	registerNode(t, c, nodeName, host.Addr.String(), int32(port), declaredFeatures)

	// The pod as the apiserver has it; the provider knows its containers
	// but "ghost", and does not know the pod "stranger" at all.
	for _, p := range []*corev1.Pod{fakePod(ns, env.pod, "app", "sidecar", "ghost"), fakePod(ns, "stranger", "app")} {
		p.UID = ""
		p.Spec.NodeName = nodeName
		p.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
		if _, err := c.Client.CoreV1().Pods(ns).Create(ctx, p, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	env.f.addPod(fakePod(ns, env.pod, "app", "sidecar"))
	return env
}

// registerNode creates a Node whose kubelet endpoint is addr:port, Ready.
func registerNode(t *testing.T, c *testcluster.Cluster, name, addr string, port int32, declaredFeatures []string) {
	t.Helper()
	ctx := context.Background()
	n := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{corev1.LabelHostname: name}}}
	if _, err := c.Client.CoreV1().Nodes().Create(ctx, n, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Client.CoreV1().Nodes().Delete(context.Background(), name, metav1.DeleteOptions{}) })
	capacity := corev1.ResourceList{
		corev1.ResourceCPU:    resource.MustParse("8"),
		corev1.ResourceMemory: resource.MustParse("16Gi"),
		corev1.ResourcePods:   resource.MustParse("110"),
	}
	// The node lifecycle controller taints new nodes at once: retry on conflict.
	err := retry.RetryOnConflict(retry.DefaultRetry, func() error {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		n.Status = corev1.NodeStatus{
			Capacity:         capacity,
			Allocatable:      capacity,
			Conditions:       []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue, Reason: "Test", LastHeartbeatTime: metav1.Now()}},
			Addresses:        []corev1.NodeAddress{{Type: corev1.NodeInternalIP, Address: addr}},
			DaemonEndpoints:  corev1.NodeDaemonEndpoints{KubeletEndpoint: corev1.DaemonEndpoint{Port: port}},
			DeclaredFeatures: declaredFeatures,
		}
		_, err = c.Client.CoreV1().Nodes().UpdateStatus(ctx, n, metav1.UpdateOptions{})
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	if len(declaredFeatures) > 0 {
		n, err := c.Client.CoreV1().Nodes().Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if len(n.Status.DeclaredFeatures) != len(declaredFeatures) {
			t.Fatalf("node %s declares %v, want %v (is NodeDeclaredFeatures enabled?)", name, n.Status.DeclaredFeatures, declaredFeatures)
		}
	}
}

func (e *e2eEnv) execURL(cmd []string, stdin, stdout, stderr, tty bool) *url.URL {
	return e.c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name(e.pod).SubResource("exec").
		VersionedParams(&corev1.PodExecOptions{Container: "app", Command: cmd, Stdin: stdin, Stdout: stdout, Stderr: stderr, TTY: tty}, scheme.ParameterCodec).URL()
}

func (e *e2eEnv) attachURL(_ []string, stdin, stdout, stderr, tty bool) *url.URL {
	return e.c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name(e.pod).SubResource("attach").
		VersionedParams(&corev1.PodAttachOptions{Container: "app", Stdin: stdin, Stdout: stdout, Stderr: stderr, TTY: tty}, scheme.ParameterCodec).URL()
}

// nodeVariants are the two ways the apiserver reaches the node for
// WebSocket clients: translating to SPDY, or (when the node declares it)
// proxying the WebSocket as it is.
var nodeVariants = []struct {
	name     string
	features []string
}{
	{"translated", nil},
	{"websocket-to-node", []string{extendWebSocketsToKubelet}},
}

func TestE2ELogs(t *testing.T) {
	e := newE2EEnv(t)
	ctx := context.Background()
	logs := func(opts *corev1.PodLogOptions) (string, error) {
		b, err := e.c.Client.CoreV1().Pods(e.ns).GetLogs(e.pod, opts).DoRaw(ctx)
		return string(b), err
	}

	got, err := logs(&corev1.PodLogOptions{Container: "app", TailLines: ptr.To[int64](2)})
	if want := logLine("app", 9, false) + logLine("app", 10, false); err != nil || got != want {
		t.Errorf("tailLines=2: %q, %v; want %q", got, err, want)
	}
	got, err = logs(&corev1.PodLogOptions{Container: "sidecar", TailLines: ptr.To[int64](1), Timestamps: true})
	if want := logLine("sidecar", 10, true); err != nil || got != want {
		t.Errorf("timestamps: %q, %v; want %q", got, err, want)
	}
	got, err = logs(&corev1.PodLogOptions{Container: "app", LimitBytes: ptr.To[int64](12)})
	if want := logLine("app", 1, false) + "a"; err != nil || got != want {
		t.Errorf("limitBytes=12: %q, %v; want %q", got, err, want)
	}

	// Follow: lines arrive as they are written; leaving ends the provider's
	// stream.
	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	rc, err := e.c.Client.CoreV1().Pods(e.ns).GetLogs(e.pod, &corev1.PodLogOptions{Container: "app", Follow: true, TailLines: ptr.To[int64](1)}).Stream(fctx)
	if err != nil {
		t.Fatal(err)
	}
	r := bufio.NewReader(rc)
	for i := 10; i < 14; i++ {
		line, err := r.ReadString('\n')
		if want := logLine("app", i, false); err != nil || line != want {
			t.Fatalf("follow: %q, %v; want %q", line, err, want)
		}
	}
	cancel()
	_ = rc.Close()
	select {
	case <-e.f.followDone:
	case <-time.After(30 * time.Second):
		t.Error("follow: the provider's stream did not end after the client left")
	}

	// Unknown to the provider: 404 from the node, NotFound for the client.
	for _, c := range []struct{ pod, container string }{{e.pod, "ghost"}, {"stranger", "app"}} {
		_, err := e.c.Client.CoreV1().Pods(e.ns).GetLogs(c.pod, &corev1.PodLogOptions{Container: c.container}).DoRaw(ctx)
		if !apierrors.IsNotFound(err) || !strings.Contains(err.Error(), "could not find") {
			t.Errorf("logs of %s/%s: %v, want NotFound", c.pod, c.container, err)
		}
	}
}

func TestE2EExecAndAttach(t *testing.T) {
	for _, v := range nodeVariants {
		t.Run(v.name, func(t *testing.T) {
			e := newE2EEnv(t, v.features...)
			for _, k := range defaultExecutors {
				t.Run(k.name, func(t *testing.T) {
					e.takeUpgrades()
					checkExecSessions(t, e.c.Config, k, e.execURL, e.attachURL)
					// The node sees WebSocket only when it declares so.
					if k.name == "websocket" && len(v.features) > 0 {
						e.checkUpgrades(t, "websocket", "v5.channel.k8s.io")
					} else {
						e.checkUpgrades(t, "spdy/3.1", "channel.k8s.io")
					}
				})
			}
		})
	}
}

// TestE2EExecNotFound: exec into a container or pod the provider does not
// know fails with not found, before any stream is set up.
func TestE2EExecNotFound(t *testing.T) {
	e := newE2EEnv(t)
	for _, pod := range []string{e.pod, "stranger"} {
		container := "ghost"
		if pod == "stranger" {
			container = "app"
		}
		u := e.c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name(pod).SubResource("exec").
			VersionedParams(&corev1.PodExecOptions{Container: container, Command: []string{"echo"}, Stdout: true}, scheme.ParameterCodec).URL()
		for _, k := range defaultExecutors {
			_, _, err := stream(t, k, e.c.Config, u, remotecommand.StreamOptions{})
			if err == nil || !strings.Contains(err.Error(), "not found") {
				t.Errorf("%s: exec into %s/%s: %v, want not found", k.name, pod, container, err)
			}
		}
	}
}

func TestE2EPortForward(t *testing.T) {
	for _, v := range nodeVariants {
		t.Run(v.name, func(t *testing.T) {
			e := newE2EEnv(t, v.features...)
			u := e.c.Client.CoreV1().RESTClient().Post().Resource("pods").Namespace(e.ns).Name(e.pod).SubResource("portforward").URL()
			for _, k := range dialers {
				t.Run(k.name, func(t *testing.T) {
					e.takeUpgrades()
					checkPortForward(t, e.c.Config, k, u)
					if k.name == "websocket" && len(v.features) > 0 {
						e.checkUpgrades(t, "websocket", "SPDY/3.1+portforward.k8s.io")
					} else {
						e.checkUpgrades(t, "spdy/3.1", "portforward.k8s.io")
					}
				})
			}
		})
	}
}

func TestE2EStatsAndMetrics(t *testing.T) {
	e := newE2EEnv(t)
	ctx := context.Background()
	proxy := func(path ...string) []byte {
		t.Helper()
		b, err := e.c.Client.CoreV1().RESTClient().Get().AbsPath(append([]string{"/api/v1/nodes", e.node, "proxy"}, path...)...).DoRaw(ctx)
		if err != nil {
			t.Fatalf("nodes/proxy/%s: %v", strings.Join(path, "/"), err)
		}
		return b
	}

	var s statsv1alpha1.Summary
	if err := json.Unmarshal(proxy("stats", "summary"), &s); err != nil {
		t.Fatal(err)
	}
	if len(s.Pods) != 1 || s.Pods[0].PodRef.Name != e.pod || s.Node.CPU == nil {
		t.Errorf("stats summary: %+v", s)
	}

	families := parseMetrics(t, string(proxy("metrics", "resource")))
	podLabels := map[string]string{"pod": e.pod, "namespace": e.ns}
	if v := value(sample(t, families, "pod_cpu_usage_seconds_total", podLabels)); v != 3 {
		t.Errorf("pod_cpu_usage_seconds_total = %v", v)
	}
	if v := value(sample(t, families, "container_memory_working_set_bytes", map[string]string{"container": "sidecar", "pod": e.pod, "namespace": e.ns})); v != 2<<20 {
		t.Errorf("container_memory_working_set_bytes = %v", v)
	}
	if v := value(sample(t, families, "node_cpu_usage_seconds_total", nil)); v != 12.5 {
		t.Errorf("node_cpu_usage_seconds_total = %v", v)
	}

	var pods corev1.PodList
	if err := json.Unmarshal(proxy("pods"), &pods); err != nil || len(pods.Items) != 1 {
		t.Errorf("pods: %d, %v", len(pods.Items), err)
	}
}

// TestE2EAuthz calls the server directly: a ServiceAccount allowed
// nodes/stats and nodes/proxy gets in, one that is not is forbidden, no
// credentials is unauthorized.
func TestE2EAuthz(t *testing.T) {
	e := newE2EEnv(t)
	ctx := context.Background()
	c := e.c

	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: testcluster.UniqueName("vkapi-node-reader")},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"nodes/stats", "nodes/proxy"}, Verbs: []string{"get"}}},
	}
	if _, err := c.Client.RbacV1().ClusterRoles().Create(ctx, role, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.RbacV1().ClusterRoles().Delete(context.Background(), role.Name, metav1.DeleteOptions{})
	})
	token := map[string]string{}
	for _, sa := range []string{"reader", "nobody"} {
		if _, err := c.Client.CoreV1().ServiceAccounts(e.ns).Create(ctx, &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: sa}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		tr, err := c.Client.CoreV1().ServiceAccounts(e.ns).CreateToken(ctx, sa, &authenticationv1.TokenRequest{
			Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](600)},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		token[sa] = tr.Status.Token
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: role.Name},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Namespace: e.ns, Name: "reader"}},
	}
	if _, err := c.Client.RbacV1().ClusterRoleBindings().Create(ctx, binding, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = c.Client.RbacV1().ClusterRoleBindings().Delete(context.Background(), binding.Name, metav1.DeleteOptions{})
	})
	// Wait for RBAC to see the binding before asking the node, which
	// would cache a denial.
	err := wait.PollUntilContextTimeout(ctx, 100*time.Millisecond, time.Minute, true, func(ctx context.Context) (bool, error) {
		sar, err := c.Client.AuthorizationV1().SubjectAccessReviews().Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User:               "system:serviceaccount:" + e.ns + ":reader",
			Groups:             []string{"system:serviceaccounts"},
			ResourceAttributes: &authorizationv1.ResourceAttributes{Verb: "get", Resource: "nodes", Subresource: "stats", Name: e.node},
		}}, metav1.CreateOptions{})
		return err == nil && sar.Status.Allowed, nil
	})
	if err != nil {
		t.Fatalf("RBAC never allowed the reader: %v", err)
	}

	client := &http.Client{
		Timeout:   30 * time.Second,
		Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}},
	}
	do := func(method, path, bearer string) (int, string) {
		t.Helper()
		req, _ := http.NewRequest(method, e.base+path, nil)
		if bearer != "" {
			req.Header.Set("Authorization", "Bearer "+bearer)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	reader := "system:serviceaccount:" + e.ns + ":reader"
	nobody := "system:serviceaccount:" + e.ns + ":nobody"
	for _, c := range []struct {
		name, method, path, token string
		code                      int
		body                      string
	}{
		{"reader", "GET", "/stats/summary", token["reader"], 200, `"nodeName":"fake"`},
		{"reader, logs", "GET", "/containerLogs/" + e.ns + "/" + e.pod + "/app?tailLines=1", token["reader"], 200, "app line 10"},
		{"reader, bad query", "GET", "/containerLogs/" + e.ns + "/" + e.pod + "/app?tailLines=-1", token["reader"], 400, "tailLines"},
		{"reader, exec", "POST", "/exec/" + e.ns + "/" + e.pod + "/app?command=ls&output=1", token["reader"], 403,
			"Forbidden (user=" + reader + ", verb=create, resource=nodes, subresource=proxy)"},
		{"nobody", "GET", "/stats/summary", token["nobody"], 403, "Forbidden (user=" + nobody + ", verb=get, resource=nodes, subresource=stats)"},
		{"anonymous", "GET", "/stats/summary", "", 401, "Unauthorized"},
		{"forged token", "GET", "/stats/summary", "not-a-token", 401, "Unauthorized"},
		{"anonymous healthz", "GET", "/healthz", "", 200, "ok"},
	} {
		if code, body := do(c.method, c.path, c.token); code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %q, want %d %q", c.name, code, body, c.code, c.body)
		}
	}
}
