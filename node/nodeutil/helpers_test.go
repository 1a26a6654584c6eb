package nodeutil_test

import (
	"context"
	"crypto/tls"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/client-go/util/cert"

	"github.com/vkubelet/virtual-kubelet/node/nodeutil"
)

func TestPodFilters(t *testing.T) {
	onNode := nodeutil.FilterPodsForNodeName("vk0")
	labelled := func(_ context.Context, p *corev1.Pod) bool { return p.Labels["run"] == "yes" }
	both := nodeutil.PodFilters(onNode, labelled)
	pod := func(node, run string) *corev1.Pod {
		return &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"run": run}}, Spec: corev1.PodSpec{NodeName: node}}
	}
	for _, tc := range []struct {
		pod  *corev1.Pod
		want bool
	}{
		{pod("vk0", "yes"), true},
		{pod("vk0", "no"), false},
		{pod("other", "yes"), false},
	} {
		if got := both(context.Background(), tc.pod); got != tc.want {
			t.Errorf("node %q run %q: %v, want %v", tc.pod.Spec.NodeName, tc.pod.Labels["run"], got, tc.want)
		}
	}
	if !nodeutil.PodFilters()(context.Background(), pod("x", "")) {
		t.Error("no filters must accept every pod")
	}
}

func TestNoAuthAndRequestAttributes(t *testing.T) {
	h := nodeutil.WithAuth(nodeutil.InstrumentAuth(nodeutil.NoAuth()), http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		_, _ = w.Write([]byte("served"))
	}))
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/stats/summary", nil))
	if rec.Code != 200 || rec.Body.String() != "served" {
		t.Errorf("NoAuth: %d %q", rec.Code, rec.Body.String())
	}
	attrs := nodeutil.NodeRequestAttr{NodeName: "vk0"}.GetRequestAttributes(&user.DefaultInfo{Name: "u"}, httptest.NewRequest("POST", "/exec/ns/p/c", nil))
	if attrs.GetName() != "vk0" || attrs.GetResource() != "nodes" || attrs.GetSubresource() != "proxy" || attrs.GetVerb() != "create" {
		t.Errorf("attributes: %+v", attrs)
	}
}

func TestTLSHelpers(t *testing.T) {
	dir := t.TempDir()
	certPEM, keyPEM, err := cert.GenerateSelfSignedCertKey("vk0", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	certFile, keyFile := filepath.Join(dir, "c.pem"), filepath.Join(dir, "k.pem")
	if err := os.WriteFile(certFile, certPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, keyPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	var cfg nodeutil.NodeConfig
	opt := nodeutil.WithTLSConfig(nodeutil.WithKeyPairFromPath(certFile, keyFile), nodeutil.WithCAFromPath(certFile))
	if err := opt(&cfg); err != nil {
		t.Fatal(err)
	}
	c := cfg.TLSConfig
	if len(c.Certificates) != 1 || c.ClientCAs == nil || c.ClientAuth != tls.VerifyClientCertIfGiven || c.MinVersion != tls.VersionTLS12 || len(c.CipherSuites) != len(nodeutil.DefaultServerCiphers()) {
		t.Errorf("TLS config: %d certificates, CAs %v, client auth %v, min version %x, %d suites", len(c.Certificates), c.ClientCAs != nil, c.ClientAuth, c.MinVersion, len(c.CipherSuites))
	}
	if err := nodeutil.WithCAFromPath(filepath.Join(dir, "missing.pem"))(&tls.Config{}); err == nil {
		t.Error("a missing CA file must be an error")
	}
}
