package commands

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"io"
	"net"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/node/api"
)

func TestKubeletListenerFlag(t *testing.T) {
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--kubelet-listener", "both"}, `--kubelet-listener "both" must be per-node or shared`},
		{[]string{"--node-count", "30", "--kubelet-listener", "shared", "--metrics-addr", ":10250"},
			`--metrics-addr ":10250" is on the kubelet API port of every node (--listen-port 10250, --kubelet-listener shared)`},
		// Managed nodes, however many, share the one port too.
		{[]string{"--manage-all-nodes", "--kubelet-listener", "shared", "--metrics-addr", "127.0.0.1:10250"},
			`--metrics-addr "127.0.0.1:10250" is on the kubelet API port of every node (--listen-port 10250, --kubelet-listener shared)`},
		// Per node, the port range is the nodes'; shared, one port.
		{[]string{"--node-count", "30", "--metrics-addr", ":10279"}, "is on the kubelet API port of node vk-29 (--listen-port 10250 + 29)"},
	} {
		code, _, stderr := run(t, append([]string{"--provider", "fake", "--nodename", "vk"}, c.args...)...)
		if code == 0 || strings.Count(strings.TrimSpace(stderr), "\n") != 0 || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d, %q; want one line containing %q", c.args, code, stderr, c.want)
		}
	}

	for _, c := range []struct {
		count    int
		listener string
		shared   bool
	}{
		{1, ListenerShared, false}, // one node has one listener either way
		{3, ListenerShared, true},
		{3, ListenerPerNode, false},
	} {
		o := &Options{}
		o.Node.NodeName, o.Node.NodeCount = "vk", c.count
		o.Server.ListenPort, o.Server.KubeletListener = 65534, c.listener
		o.Server.MetricsAddr = "127.0.0.1:65535"
		err := o.Validate()
		names := o.Node.NodeNames()
		last := names[len(names)-1]
		annotations := o.nodeAnnotations(last)
		if c.shared {
			// Three nodes on one port near the top: no range past 65535.
			if err != nil && strings.Contains(err.Error(), "port") {
				t.Errorf("%d nodes, %s: %v", c.count, c.listener, err)
			}
			if o.kubeletPort(2) != 65534 || o.kubeletPorts() != 1 {
				t.Errorf("%d nodes, %s: node 2 on port %d, %d ports", c.count, c.listener, o.kubeletPort(2), o.kubeletPorts())
			}
			if want := "/nodes/" + last + "/metrics/resource"; annotations[api.ResourceMetricsPathAnnotation] != want || len(annotations) != 1 {
				t.Errorf("%d nodes, %s: annotations %v, want %s", c.count, c.listener, annotations, want)
			}
			continue
		}
		if annotations != nil || o.kubeletPort(len(names)-1) != 65534+int32(len(names)-1) {
			t.Errorf("%d nodes, %s: annotations %v, last port %d", c.count, c.listener, annotations, o.kubeletPort(len(names)-1))
		}
	}
}

// TestSharedListenerServesEveryNode: three mock nodes behind one listener.
// Each pod's logs come from its own node's provider, each node's routes
// from under its /nodes/NAME/ path; the certificate names every node and
// the address; a node that leaves is no longer served, the others are.
func TestSharedListenerServesEveryNode(t *testing.T) {
	o := &Options{}
	o.Provider.Name = "mock"
	o.Node.NodeName, o.Node.NodeCount, o.Node.OperatingSystem = "vk", 3, "linux"
	o.Node.TaintKey, o.Node.TaintEffect = "virtual-kubelet.io/provider", string(corev1.TaintEffectNoSchedule)
	o.Node.StatusReportFrequency = time.Minute
	o.Server = ServerOptions{
		ListenAddress: "127.0.0.1", ListenPort: int32(freeport.Get(t)), KubeletListener: ListenerShared,
		AnonymousAuth: true, AuthorizationMode: AuthzAlwaysAllow,
	}
	pod := func(name, node string) *corev1.Pod {
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, UID: types.UID("uid-" + name)},
			Spec:       corev1.PodSpec{NodeName: node, Containers: []corev1.Container{{Name: "app", Image: "busybox"}}},
		}
	}
	pods := []*corev1.Pod{pod("p0", "vk-0"), pod("p1", "vk-1"), pod("elsewhere", "other-node")}
	client := fake.NewClientset(pods[0], pods[1], pods[2])

	ctx, cancel := context.WithCancel(t.Context())
	sh, err := startShared(ctx, o, client, nil)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	defer sh.stop()
	defer cancel()
	servers, err := startServers(ctx, &o.Server, &o.Node, client, &rest.Config{}, "127.0.0.1", o.podRouting(sh))
	if err != nil {
		t.Fatal(err)
	}
	defer servers.shutdown(time.Second)
	stops := map[string]func(){}
	for i, name := range o.Node.NodeNames() {
		_, caps, err := buildNode(withNode(ctx, name), o, name, o.kubeletPort(i), "127.0.0.1", sh, nil)
		if err != nil {
			t.Fatal(err)
		}
		if i < 2 {
			if err := caps.Pods.CreatePod(ctx, pods[i].DeepCopy()); err != nil {
				t.Fatal(err)
			}
		}
		if stops[name], err = servers.kubeletAPI(ctx, name, o.kubeletPort(i), "127.0.0.1", caps); err != nil {
			t.Fatal(err)
		}
	}
	if len(servers.list) != 1 {
		t.Errorf("%d servers for 3 nodes, want the one listener", len(servers.list))
	}

	addr := net.JoinHostPort("127.0.0.1", strconv.Itoa(int(o.Server.ListenPort)))
	var certificate []string
	https := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{
		InsecureSkipVerify: true, // the test reads the certificate's names below
		VerifyConnection: func(cs tls.ConnectionState) error {
			leaf := cs.PeerCertificates[0]
			certificate = append(slices.Clone(leaf.DNSNames), leaf.IPAddresses[0].String())
			return nil
		},
	}}}
	get := func(path string) (int, string) {
		t.Helper()
		resp, err := https.Get("https://" + addr + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(body)
	}
	// The informer may not have listed the pods yet.
	deadline := time.Now().Add(10 * time.Second)
	for {
		if _, ok := sh.podNode("ns", "p1"); ok || time.Now().After(deadline) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}

	for _, p := range []string{"p0", "p1"} {
		if code, body := get("/containerLogs/ns/" + p + "/app"); code != 200 {
			t.Errorf("logs of %s: %d %q", p, code, body)
		}
	}
	for i, name := range o.Node.NodeNames() {
		code, body := get("/nodes/" + name + "/pods")
		var list corev1.PodList
		if code != 200 || json.Unmarshal([]byte(body), &list) != nil {
			t.Fatalf("%s's pods: %d %q", name, code, body)
		}
		want := 0
		if i < 2 {
			want = 1
		}
		if len(list.Items) != want || want == 1 && list.Items[0].Name != pods[i].Name {
			t.Errorf("%s's pods: %v", name, list.Items)
		}
	}
	for path, want := range map[string]string{
		"/containerLogs/ns/nope/app":      "pod ns/nope not found",
		"/containerLogs/ns/elsewhere/app": "pod ns/elsewhere is on node other-node, which this listener does not serve",
		"/stats/summary":                  "/nodes/{node}/stats/summary",
	} {
		if code, body := get(path); code != 404 || !strings.Contains(body, want) {
			t.Errorf("%s: %d %q, want 404 %q", path, code, body, want)
		}
	}
	slices.Sort(certificate)
	certificate = slices.Compact(certificate)
	if want := []string{"127.0.0.1", "vk-0", "vk-1", "vk-2"}; !slices.Equal(certificate, want) {
		t.Errorf("serving certificate for %v, want %v", certificate, want)
	}

	stops["vk-1"]()
	if code, body := get("/containerLogs/ns/p1/app"); code != 404 || !strings.Contains(body, "on node vk-1, which this listener does not serve") {
		t.Errorf("a pod of a node that left: %d %q", code, body)
	}
	if code, _ := get("/containerLogs/ns/p0/app"); code != 200 {
		t.Errorf("a pod of a node that stayed: %d", code)
	}
}
