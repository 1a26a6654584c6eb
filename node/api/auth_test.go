package api_test

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"
	"k8s.io/apiserver/pkg/endpoints/request"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/rest"

	"github.com/vkubelet/virtual-kubelet/internal/testing/testpki"
	"github.com/vkubelet/virtual-kubelet/node/api"
)

func TestNodeRequestAttributes(t *testing.T) {
	u := &user.DefaultInfo{Name: "alice"}
	for _, c := range []struct {
		method, path, verb, subresource string
	}{
		{"GET", "/stats/summary", "get", "stats"},
		{"GET", "/stats", "get", "stats"},
		{"GET", "/stats/", "get", "stats"},
		{"GET", "/statsfoo", "get", "proxy"},
		{"GET", "/metrics", "get", "metrics"},
		{"GET", "/metrics/resource", "get", "metrics"},
		{"GET", "/metrics/cadvisor", "get", "metrics"},
		{"GET", "/logs/", "get", "log"},
		{"GET", "/logs/messages", "get", "log"},
		{"GET", "/containerLogs/ns/p/c", "get", "proxy"},
		{"POST", "/exec/ns/p/c", "create", "proxy"},
		{"GET", "/exec/ns/p/c", "get", "proxy"},
		{"POST", "/attach/ns/p/c", "create", "proxy"},
		{"POST", "/portForward/ns/p", "create", "proxy"},
		{"GET", "/pods", "get", "proxy"},
		{"GET", "/runningpods/", "get", "proxy"},
		{"HEAD", "/healthz", "get", "proxy"},
		{"PUT", "/x", "update", "proxy"},
		{"PATCH", "/x", "patch", "proxy"},
		{"DELETE", "/x", "delete", "proxy"},
		{"OPTIONS", "/x", "", "proxy"},
		// Path tricks are cleaned before mapping.
		{"GET", "/pods/../stats/summary", "get", "stats"},
		{"GET", "//stats//summary", "get", "stats"},
	} {
		r := httptest.NewRequest(c.method, "http://node"+c.path, nil)
		r.URL.Path = c.path
		a := api.NodeRequestAttributes("node-1", u, r)
		if a.Verb != c.verb || a.Subresource != c.subresource || a.Resource != "nodes" || a.Name != "node-1" ||
			a.APIVersion != "v1" || a.APIGroup != "" || a.Namespace != "" || !a.ResourceRequest || a.User != u || a.Path != c.path {
			t.Errorf("%s %s: %+v, want verb %q subresource %q", c.method, c.path, a, c.verb, c.subresource)
		}
	}
}

func TestWithAuth(t *testing.T) {
	var seen user.Info
	inner := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		seen, _ = request.UserFrom(r.Context())
		_, _ = io.WriteString(w, "inner")
	})
	// alice may only get stats; authorizing boom fails.
	auth := &tokenAuth{users: []string{"alice", "boom"}, allow: func(a authorizer.Attributes) (bool, error) {
		if a.GetUser().GetName() == "boom" {
			return false, errors.New("SAR failed")
		}
		return a.GetUser().GetName() == "alice" && a.GetSubresource() == "stats" && a.GetVerb() == "get", nil
	}}
	h := api.WithAuth(inner, api.NewAuthFrom(auth, auth, "node-1"))
	for _, r := range []authCase{
		{"", "GET", "/healthz", 200, "inner"},
		{"", "GET", "/stats/summary", 401, "Unauthorized"},
		{"broken", "GET", "/stats/summary", 401, "Unauthorized"},
		{"mallory", "GET", "/stats/summary", 401, "Unauthorized"},
		{"alice", "GET", "/stats/summary", 200, "inner"},
		{"alice", "GET", "/pods", 403, "Forbidden (user=alice, verb=get, resource=nodes, subresource=proxy)"},
		{"alice", "POST", "/exec/ns/p/c", 403, "Forbidden (user=alice, verb=create, resource=nodes, subresource=proxy)"},
		{"boom", "GET", "/stats/summary", 500, "Authorization error (user=boom, verb=get, resource=nodes, subresource=stats)"},
	} {
		seen = nil
		r.check(t, h)
		if r.code == 200 && r.target != "/healthz" && (seen == nil || seen.GetName() != r.token) {
			t.Errorf("%s %s: handler saw user %v", r.method, r.target, seen)
		}
	}
}

func TestNewAuthConfig(t *testing.T) {
	ctx := context.Background()
	client := fake.NewClientset()
	if _, err := api.NewAuth(ctx, api.AuthConfig{SubjectAccessReviewClient: client.AuthorizationV1(), Anonymous: true}); err == nil {
		t.Error("no node name: no error")
	}
	if _, err := api.NewAuth(ctx, api.AuthConfig{NodeName: "n", Anonymous: true}); err == nil {
		t.Error("no SubjectAccessReview client: no error")
	}
	if _, err := api.NewAuth(ctx, api.AuthConfig{NodeName: "n", SubjectAccessReviewClient: client.AuthorizationV1()}); err == nil {
		t.Error("no authentication method: no error")
	}
	if _, err := api.NewAuth(ctx, api.AuthConfig{NodeName: "n", SubjectAccessReviewClient: client.AuthorizationV1(), ClientCAFile: "/does/not/exist"}); err == nil {
		t.Error("missing CA file: no error")
	}
}

// TestNewAuth runs NewAuth's authenticators and authorizer against a fake
// clientset: a client certificate signed by the CA, a bearer token through
// TokenReview, anonymous requests, and SubjectAccessReviews that see the
// node's attributes.
func TestNewAuth(t *testing.T) {
	ca := newCA(t)
	dir := t.TempDir()
	caFile := filepath.Join(dir, "ca.crt")
	if err := os.WriteFile(caFile, ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	apiserverCert := newClientCert(t, ca, "kube-apiserver-kubelet-client", "system:masters")
	strangerCert := newClientCert(t, newCA(t), "stranger", "system:masters")

	// A stand-in for the apiserver's review APIs.
	var mu sync.Mutex
	var sars []authorizationv1.SubjectAccessReviewSpec
	reviews := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		switch r.URL.Path {
		case "/apis/authentication.k8s.io/v1/tokenreviews":
			var tr authenticationv1.TokenReview
			if err := json.NewDecoder(r.Body).Decode(&tr); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			if tr.Spec.Token == "bob-token" {
				tr.Status = authenticationv1.TokenReviewStatus{Authenticated: true, User: authenticationv1.UserInfo{Username: "bob", Groups: []string{"readers"}}}
			}
			_ = json.NewEncoder(w).Encode(&tr)
		case "/apis/authorization.k8s.io/v1/subjectaccessreviews":
			var sar authorizationv1.SubjectAccessReview
			if err := json.NewDecoder(r.Body).Decode(&sar); err != nil {
				http.Error(w, err.Error(), 400)
				return
			}
			mu.Lock()
			sars = append(sars, sar.Spec)
			mu.Unlock()
			ra := sar.Spec.ResourceAttributes
			switch {
			case contains(sar.Spec.Groups, "system:masters"):
				sar.Status.Allowed = true
			case sar.Spec.User == "bob" && ra != nil && ra.Subresource == "stats" && ra.Verb == "get":
				sar.Status.Allowed = true
			}
			_ = json.NewEncoder(w).Encode(&sar)
		default:
			http.NotFound(w, r)
		}
	}))
	defer reviews.Close()
	client, err := kubernetes.NewForConfig(&rest.Config{Host: reviews.URL})
	if err != nil {
		t.Fatal(err)
	}

	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	auth, err := api.NewAuth(ctx, api.AuthConfig{
		ClientCAFile:              caFile,
		Anonymous:                 true,
		TokenReviewClient:         client.AuthenticationV1(),
		SubjectAccessReviewClient: client.AuthorizationV1(),
		NodeName:                  "node-1",
	})
	if err != nil {
		t.Fatal(err)
	}
	f := newFakeProvider()
	srv := httptest.NewUnstartedServer(api.WithAuth(api.PodHandler(f.config(), true), auth))
	srv.TLS = &tls.Config{ClientAuth: tls.RequestClientCert}
	srv.StartTLS()
	defer srv.Close()

	get := func(path string, cert *tls.Certificate, token string) (int, string) {
		t.Helper()
		tr := srv.Client().Transport.(*http.Transport).Clone()
		if cert != nil {
			tr.TLSClientConfig.Certificates = []tls.Certificate{*cert}
		}
		req, _ := http.NewRequest("GET", srv.URL+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	for _, c := range []struct {
		name, path string
		cert       *tls.Certificate
		token      string
		code       int
		body       string
	}{
		{"apiserver cert, stats", "/stats/summary", &apiserverCert, "", 200, "nodeName"},
		{"apiserver cert, pods", "/pods", &apiserverCert, "", 200, "PodList"},
		{"bob token, stats", "/stats/summary", nil, "bob-token", 200, "nodeName"},
		{"bob token, pods", "/pods", nil, "bob-token", 403, "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)"},
		{"bad token", "/stats/summary", nil, "nope", 401, "Unauthorized"},
		{"foreign cert", "/stats/summary", &strangerCert, "", 401, "Unauthorized"},
		{"apiserver cert, bad token", "/pods", &apiserverCert, "nope", 200, "PodList"},
		{"foreign cert, bob token", "/stats/summary", &strangerCert, "bob-token", 200, "nodeName"},
		{"foreign cert, bob token, pods", "/pods", &strangerCert, "bob-token", 403, "Forbidden (user=bob, verb=get, resource=nodes, subresource=proxy)"},
		{"anonymous", "/stats/summary", nil, "", 403, "user=system:anonymous"},
	} {
		if code, body := get(c.path, c.cert, c.token); code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s: %d %q, want %d %q", c.name, code, body, c.code, c.body)
		}
	}
	mu.Lock()
	defer mu.Unlock()
	var sawNode bool
	for _, s := range sars {
		if ra := s.ResourceAttributes; ra != nil && ra.Resource == "nodes" && ra.Name == "node-1" && ra.Version == "v1" {
			sawNode = true
		}
	}
	if !sawNode {
		t.Errorf("no SubjectAccessReview for nodes/node-1: %+v", sars)
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func newCA(t *testing.T) *testpki.Authority {
	t.Helper()
	ca, err := testpki.NewAuthority("test-ca", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func newClientCert(t *testing.T, ca *testpki.Authority, cn string, orgs ...string) tls.Certificate {
	t.Helper()
	p, err := ca.Issue(testpki.Leaf{CommonName: cn, Organization: orgs, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	return p.TLS()
}
