package api_test

import (
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

// echoNode answers with its name, the path and query it was given.
func echoNode(name string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprintf(w, "%s %s", name, r.URL.RequestURI())
	})
}

// newTestRouter serves nodes a and b; pods ns/p1 are on a, ns/p2 on b,
// ns/p3 on c, which the router does not serve. The bearer token "admin"
// may do everything on every node, "alice" everything on node a only (an
// RBAC rule with resourceNames [a]).
func newTestRouter(t *testing.T) (*api.NodeRouter, *tokenAuth) {
	t.Helper()
	pods := map[string]string{"ns/p1": "a", "ns/p2": "b", "ns/p3": "c"}
	auth := &tokenAuth{users: []string{"admin", "alice"}, allow: func(a authorizer.Attributes) (bool, error) {
		name := a.GetUser().GetName()
		return name == "admin" || name == "alice" && a.GetName() == "a", nil
	}}
	rt, err := api.NewNodeRouter(api.NodeRouterConfig{
		PodNode: func(namespace, name string) (string, bool) {
			node, ok := pods[namespace+"/"+name]
			return node, ok
		},
		Authenticator: auth,
		Authorizer:    auth,
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"a", "b"} {
		if _, err := rt.Register(name, echoNode(name)); err != nil {
			t.Fatal(err)
		}
	}
	return rt, auth
}

func TestNodeRouterRoutes(t *testing.T) {
	rt, auth := newTestRouter(t)
	for _, c := range []struct {
		method, target string
		code           int
		body           string
		// node and subresource the request was authorized for.
		node, subresource string
	}{
		// Pod routes go to the pod's node, unchanged.
		{"GET", "/containerLogs/ns/p1/app?tailLines=2", 200, "a /containerLogs/ns/p1/app?tailLines=2", "a", "proxy"},
		{"POST", "/exec/ns/p2/app?command=ls", 200, "b /exec/ns/p2/app?command=ls", "b", "proxy"},
		{"GET", "/exec/ns/p2/uid-2/app", 200, "b /exec/ns/p2/uid-2/app", "b", "proxy"},
		{"POST", "/attach/ns/p1/app", 200, "a /attach/ns/p1/app", "a", "proxy"},
		{"POST", "/portForward/ns/p2", 200, "b /portForward/ns/p2", "b", "proxy"},
		{"POST", "/portForward/ns/p1/uid-1", 200, "a /portForward/ns/p1/uid-1", "a", "proxy"},
		{"POST", "/run/ns/p1/app", 200, "a /run/ns/p1/app", "a", "proxy"},
		// Node routes go to the node the path names, without the prefix,
		// authorized on the subresource of what is left.
		{"GET", "/nodes/a/stats/summary?only_cpu_and_memory=true", 200, "a /stats/summary?only_cpu_and_memory=true", "a", "stats"},
		{"GET", "/nodes/b/metrics/resource", 200, "b /metrics/resource", "b", "metrics"},
		{"GET", "/nodes/b/pods", 200, "b /pods", "b", "proxy"},
		{"GET", "/nodes/a/runningpods/", 200, "a /runningpods/", "a", "proxy"},
		// Requests that reach no node: 404 saying why.
		{"GET", "/containerLogs/ns/nope/app", 404, "pod ns/nope not found", "", "proxy"},
		{"POST", "/exec/other/p1/app", 404, "pod other/p1 not found", "", "proxy"},
		{"POST", "/exec/ns/p3/app", 404, "pod ns/p3 is on node c, which this listener does not serve", "", "proxy"},
		{"GET", "/nodes/c/stats/summary", 404, "node c is not served by this listener", "", "stats"},
		{"GET", "/stats/summary", 404, "a node's own routes are under /nodes/{node} (/nodes/{node}/stats/summary)", "", "stats"},
		{"GET", "/metrics/resource", 404, "(/nodes/{node}/metrics/resource)", "", "metrics"},
		{"GET", "/pods", 404, "(/nodes/{node}/pods)", "", "proxy"},
		{"GET", "/nodes/a/containerLogs/ns/p2/app", 404, "pod routes are served at /containerLogs/{namespace}/{pod}/..., by the pod's node", "", "proxy"},
		{"GET", "/nodes/a%2F..%2Fb/stats/summary", 404, "node a/../b is not served", "", "stats"},
	} {
		code, body := as(rt, "admin", c.method, c.target)
		if code != c.code || !strings.Contains(body, c.body) {
			t.Errorf("%s %s: %d %q, want %d %q", c.method, c.target, code, body, c.code, c.body)
			continue
		}
		if a := auth.last(); a == nil || a.GetName() != c.node || a.GetSubresource() != c.subresource || a.GetResource() != "nodes" {
			t.Errorf("%s %s: authorized as %+v, want node %q subresource %q", c.method, c.target, a, c.node, c.subresource)
		}
	}
	// /healthz needs no credentials and no node.
	if code, body := as(rt, "", "GET", "/healthz"); code != 200 || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
}

// TestNodeRouterAuthorizesTheRoutedNode: a caller allowed on node a only
// reaches a's pods and routes, and nothing of b's, however it asks; nor
// does it learn which pods exist on nodes it may not reach.
func TestNodeRouterAuthorizesTheRoutedNode(t *testing.T) {
	rt, _ := newTestRouter(t)
	for _, r := range []authCase{
		{"alice", "GET", "/containerLogs/ns/p1/app", 200, "a /containerLogs/ns/p1/app"},
		{"alice", "GET", "/nodes/a/stats/summary", 200, "a /stats/summary"},
		// b's pod and b's routes: the review names b, which alice may not reach.
		{"alice", "GET", "/containerLogs/ns/p2/app", 403, "Forbidden (user=alice, verb=get, resource=nodes, subresource=proxy)"},
		{"alice", "POST", "/exec/ns/p2/app?command=sh", 403, "Forbidden"},
		{"alice", "GET", "/nodes/b/stats/summary", 403, "Forbidden (user=alice, verb=get, resource=nodes, subresource=stats)"},
		// Probing for pods and nodes: no 404 that would tell them apart.
		{"alice", "GET", "/containerLogs/ns/nope/app", 403, "Forbidden"},
		{"alice", "GET", "/containerLogs/ns/p3/app", 403, "Forbidden"},
		{"alice", "GET", "/nodes/c/stats/summary", 403, "Forbidden"},
		{"alice", "GET", "/nodes/a/exec/ns/p2/app", 403, "Forbidden"},
		{"", "GET", "/containerLogs/ns/p1/app", 401, "Unauthorized"},
		{"", "GET", "/containerLogs/ns/nope/app", 401, "Unauthorized"},
		{"", "GET", "/nodes/a/stats/summary", 401, "Unauthorized"},
		{"", "GET", "/nodes/c/stats/summary", 401, "Unauthorized"},
		{"mallory", "GET", "/stats/summary", 401, "Unauthorized"},
	} {
		r.check(t, rt)
	}
	// A path that climbs out of a's pod or a's prefix is cleaned and
	// redirected, never served as it stands.
	for target, cleaned := range map[string]string{
		"/containerLogs/ns/p1/../../ns/p2/app": "/containerLogs/ns/p2/app",
		"/nodes/a/../b/stats/summary":          "/nodes/b/stats/summary",
	} {
		r := httptest.NewRequest("GET", target, nil)
		r.Header.Set("Authorization", "Bearer alice")
		rec := httptest.NewRecorder()
		rt.ServeHTTP(rec, r)
		if rec.Code != http.StatusTemporaryRedirect || rec.Header().Get("Location") != cleaned {
			t.Errorf("%s: %d to %q, want a redirect to %s", target, rec.Code, rec.Header().Get("Location"), cleaned)
		}
	}
}

func TestNodeRouterRegister(t *testing.T) {
	rt, _ := newTestRouter(t)
	if _, err := rt.Register("a", echoNode("a")); err == nil || !strings.Contains(err.Error(), "node a is served already") {
		t.Errorf("registering a twice: %v", err)
	}
	if _, err := rt.Register("", echoNode("")); err == nil {
		t.Error("registering no name: no error")
	}
	if _, err := api.NewNodeRouter(api.NodeRouterConfig{}); err == nil {
		t.Error("a router without PodNode and auth: no error")
	}

	// A node that leaves: its request in flight is cancelled, its pods
	// and routes are no longer served, and it may come back.
	started, ended := make(chan struct{}), make(chan error, 1)
	unregister, err := rt.Register("c", http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		select {
		case <-r.Context().Done():
			ended <- r.Context().Err()
		case <-time.After(30 * time.Second):
			ended <- nil
		}
	}))
	if err != nil {
		t.Fatal(err)
	}
	go as(rt, "admin", "GET", "/containerLogs/ns/p3/app?follow=true")
	<-started
	unregister()
	if err := <-ended; err == nil {
		t.Error("the request in flight was not cancelled when its node left")
	}
	if code, body := as(rt, "admin", "GET", "/containerLogs/ns/p3/app"); code != 404 || !strings.Contains(body, "on node c, which this listener does not serve") {
		t.Errorf("a pod of a node that left: %d %q", code, body)
	}
	if code, _ := as(rt, "admin", "GET", "/nodes/c/stats/summary"); code != 404 {
		t.Errorf("the routes of a node that left: %d", code)
	}
	again, err := rt.Register("c", echoNode("c again"))
	if err != nil {
		t.Fatalf("registering a node that left: %v", err)
	}
	unregister() // the first registration's, once more: must not remove the second
	if code, body := as(rt, "admin", "GET", "/containerLogs/ns/p3/app"); code != 200 || body != "c again /containerLogs/ns/p3/app" {
		t.Errorf("the node's second registration: %d %q", code, body)
	}
	again()
}
