package api_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// do does a request against h and returns the status and body.
func do(t *testing.T, h http.Handler, method, target string) (int, string) {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, target, nil))
	return rec.Code, rec.Body.String()
}

func TestRoutes(t *testing.T) {
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app", "sidecar"))
	f.addPod(fakePod("ns", "db", "postgres"))
	h := api.PodHandler(f.config(), true)

	if code, body := do(t, h, "GET", "/healthz"); code != 200 || body != "ok" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	for _, path := range []string{"/pods", "/runningpods/", "/runningpods"} {
		code, body := do(t, h, "GET", path)
		if code != 200 {
			t.Fatalf("%s: %d %s", path, code, body)
		}
		var list corev1.PodList
		if err := json.Unmarshal([]byte(body), &list); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		if list.Kind != "PodList" || list.APIVersion != "v1" || len(list.Items) != 2 {
			t.Errorf("%s: kind %q apiVersion %q, %d items", path, list.Kind, list.APIVersion, len(list.Items))
		}
	}

	code, body := do(t, h, "GET", "/stats/summary")
	if code != 200 {
		t.Fatalf("/stats/summary: %d %s", code, body)
	}
	var s statsv1alpha1.Summary
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Node.NodeName != "fake" || len(s.Pods) != 2 || s.Node.Fs == nil {
		t.Errorf("/stats/summary: %+v", s)
	}

	code, body = do(t, h, "GET", "/stats/summary?only_cpu_and_memory=true")
	if code != 200 {
		t.Fatalf("only_cpu_and_memory: %d %s", code, body)
	}
	s = statsv1alpha1.Summary{}
	if err := json.Unmarshal([]byte(body), &s); err != nil {
		t.Fatal(err)
	}
	if s.Node.Fs != nil || s.Node.CPU == nil || s.Node.Memory == nil || len(s.Pods) != 2 {
		t.Errorf("only_cpu_and_memory: node %+v, %d pods", s.Node, len(s.Pods))
	}
	for _, p := range s.Pods {
		for _, c := range p.Containers {
			if c.Rootfs != nil || c.CPU == nil {
				t.Errorf("only_cpu_and_memory: container %+v", c)
			}
		}
	}
	if code, body := do(t, h, "GET", "/stats/summary?only_cpu_and_memory=maybe"); code != 400 || !strings.Contains(body, "only_cpu_and_memory") {
		t.Errorf("bad only_cpu_and_memory: %d %q", code, body)
	}

	for _, c := range []struct {
		method, path string
		code         int
	}{
		{"GET", "/nope", 404},
		{"GET", "/containerLogs/ns/web", 404},
		{"DELETE", "/pods", 405},
		{"PUT", "/exec/ns/web/app", 405},
		{"GET", "/containerLogs/ns/web/app", 200},
		{"HEAD", "/healthz", 200},
	} {
		if code, body := do(t, h, c.method, c.path); code != c.code {
			t.Errorf("%s %s: %d %q, want %d", c.method, c.path, code, body, c.code)
		}
	}
}

// TestAttachPodRoutes mounts the routes next to one of the caller's.
func TestAttachPodRoutes(t *testing.T) {
	mux := http.NewServeMux()
	mux.HandleFunc("GET /mine", func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "mine") })
	api.AttachPodRoutes(api.PodHandlerConfig{}, mux, true)
	if code, body := do(t, mux, "GET", "/mine"); code != 200 || body != "mine" {
		t.Errorf("/mine: %d %q", code, body)
	}
	if code, _ := do(t, mux, "GET", "/healthz"); code != 200 {
		t.Errorf("/healthz: %d", code)
	}
}

// TestNotImplemented: every route of a nil function answers 501 at once,
// naming what is missing, even for a streaming upgrade request.
func TestNotImplemented(t *testing.T) {
	srv := httptest.NewServer(api.PodHandler(api.PodHandlerConfig{}, true))
	defer srv.Close()
	client := &http.Client{Timeout: 5 * time.Second}
	for _, c := range []struct {
		method, path, want string
		upgrade            bool
	}{
		{"GET", "/pods", "listing pods", false},
		{"GET", "/runningpods/", "listing pods", false},
		{"GET", "/containerLogs/ns/p/c?follow=true", "container logs", false},
		{"POST", "/exec/ns/p/c?command=ls&output=1", "exec", true},
		{"GET", "/exec/ns/p/uid/c?command=ls&output=1", "exec", false},
		{"POST", "/attach/ns/p/c?output=1", "attach", true},
		{"POST", "/portForward/ns/p", "port forwarding", true},
		{"GET", "/stats/summary", "stats summary", false},
		{"GET", "/metrics/resource", "resource metrics", false},
	} {
		req, _ := http.NewRequest(c.method, srv.URL+c.path, nil)
		if c.upgrade {
			req.Header.Set("Connection", "Upgrade")
			req.Header.Set("Upgrade", "SPDY/3.1")
			req.Header.Set("X-Stream-Protocol-Version", "v4.channel.k8s.io")
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Errorf("%s %s: %v", c.method, c.path, err)
			continue
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotImplemented || !strings.Contains(string(body), c.want) {
			t.Errorf("%s %s: %d %q, want 501 naming %q", c.method, c.path, resp.StatusCode, body, c.want)
		}
	}
}

// TestErrorMapping: NotFound answers 404 with the reason, InvalidInput 400,
// anything else 500; streaming requests are checked before any upgrade.
func TestErrorMapping(t *testing.T) {
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app"))
	cfg := f.config()
	h := api.PodHandler(cfg, true)

	for _, c := range []struct {
		path, want string
		code       int
	}{
		{"/containerLogs/ns/nope/app", "pod ns/nope is not known to the provider", 404},
		{"/containerLogs/ns/web/nope", `container "nope" is not known`, 404},
		{"/containerLogs/ns/web/app?tailLines=-1", "tailLines", 400},
		{"/containerLogs/ns/web/app?follow=sure", "follow", 400},
		// Streaming requests for unknown pods or containers are refused
		// before the upgrade, by GetPod.
		{"/exec/ns/nope/app?command=ls&output=1", "pod ns/nope not found", 404},
		{"/exec/ns/web/nope?command=ls&output=1", `container "nope" not found`, 404},
		{"/exec/ns/web/uid-other/app?command=ls&output=1", "UID", 404},
		{"/attach/ns/nope/app?output=1", "not found", 404},
		{"/portForward/ns/nope", "not found", 404},
		// Malformed streaming requests.
		{"/exec/ns/web/app?output=1", "command", 400},
		{"/exec/ns/web/app?command=ls", "stdin, stdout and stderr", 400},
		{"/exec/ns/web/app?command=ls&output=yes-please", "output", 400},
		{"/attach/ns/web/app?tty=1", "stdin, stdout and stderr", 400},
	} {
		method := http.MethodPost
		if strings.HasPrefix(c.path, "/containerLogs/") {
			method = http.MethodGet
		}
		code, body := do(t, h, method, c.path)
		if code != c.code || !strings.Contains(body, c.want) {
			t.Errorf("%s: %d %q, want %d with %q", c.path, code, body, c.code, c.want)
		}
	}

	cfg.GetContainerLogs = func(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
		return nil, errdefs.InvalidInput("container is waiting to start")
	}
	if code, body := do(t, api.PodHandler(cfg, true), "GET", "/containerLogs/ns/web/app"); code != 400 || !strings.Contains(body, "waiting to start") {
		t.Errorf("InvalidInput: %d %q", code, body)
	}
	cfg.GetContainerLogs = func(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
		return nil, errors.New("backend exploded")
	}
	if code, body := do(t, api.PodHandler(cfg, true), "GET", "/containerLogs/ns/web/app"); code != 500 || !strings.Contains(body, "backend exploded") {
		t.Errorf("other error: %d %q", code, body)
	}
	cfg.GetPods = func(context.Context) ([]*corev1.Pod, error) { return nil, errors.New("lister down") }
	if code, body := do(t, api.PodHandler(cfg, true), "GET", "/pods"); code != 500 || !strings.Contains(body, "lister down") {
		t.Errorf("GetPods error: %d %q", code, body)
	}
	cfg.GetStatsSummary = func(context.Context) (*statsv1alpha1.Summary, error) { return nil, errdefs.NotFound("no stats yet") }
	if code, body := do(t, api.PodHandler(cfg, true), "GET", "/stats/summary"); code != 404 || !strings.Contains(body, "no stats yet") {
		t.Errorf("GetStatsSummary error: %d %q", code, body)
	}
	// A provider returning nothing at all is not a crash.
	cfg.GetStatsSummary = func(context.Context) (*statsv1alpha1.Summary, error) { return nil, nil }
	cfg.GetMetricsResource = api.MetricsResourceFromSummary(cfg.GetStatsSummary)
	cfg.GetContainerLogs = func(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
		return nil, nil
	}
	cfg.GetPods = func(context.Context) ([]*corev1.Pod, error) { return []*corev1.Pod{nil}, nil }
	h = api.PodHandler(cfg, true)
	for _, p := range []string{"/stats/summary", "/stats/summary?only_cpu_and_memory=1", "/metrics/resource", "/containerLogs/a/b/c", "/pods"} {
		if code, body := do(t, h, "GET", p); code != 200 {
			t.Errorf("%s with nil results: %d %q", p, code, body)
		}
	}
}

// TestOddRequests throws malformed and unexpected requests at the handler:
// each gets an answer, none a panic.
func TestOddRequests(t *testing.T) {
	f := newFakeProvider()
	f.addPod(fakePod("ns", "web", "app"))
	h := api.PodHandler(f.config(), true)
	websocket := func(protocol string) http.Header {
		return http.Header{
			"Connection": {"Upgrade"}, "Upgrade": {"websocket"}, "Sec-Websocket-Version": {"13"},
			"Sec-Websocket-Key": {"dGhlIHNhbXBsZSBub25jZQ=="}, "Sec-Websocket-Protocol": {protocol},
		}
	}
	spdy := http.Header{"Connection": {"Upgrade"}, "Upgrade": {"SPDY/3.1"}, "X-Stream-Protocol-Version": {"v4.channel.k8s.io"}}
	for _, c := range []struct {
		method, target string
		header         http.Header
	}{
		{"GET", "/containerLogs/ns/web/app?tailLines=%00&limitBytes=%ff", nil},
		{"GET", "/containerLogs/ns/web/app?" + strings.Repeat("timestamps=maybe&", 1000), nil},
		{"GET", "/containerLogs/%2F/%00/%20?sinceTime=" + strings.Repeat("9", 100), nil},
		{"GET", "/exec/ns/web/app?command=", nil},
		{"POST", "/exec/ns/web/app?command=cat&input=1&tty=1&error=1", nil},
		{"GET", "/portForward/ns/web?port=0", websocket("v4.channel.k8s.io")},
		{"GET", "/portForward/ns/web?port=99999", websocket("v4.channel.k8s.io")},
		{"GET", "/portForward/ns/web?port=abc&port=", websocket("v4.channel.k8s.io")},
		{"GET", "/portForward/ns/web", websocket("SPDY/3.1+nonsense.k8s.io")},
		// Upgrades a ResponseRecorder cannot do.
		{"GET", "/exec/ns/web/app?command=echo&output=1", websocket("v5.channel.k8s.io")},
		{"GET", "/exec/ns/web/app?command=echo&output=1", websocket("v4.channel.k8s.io")},
		{"POST", "/attach/ns/web/app?output=1", spdy},
		{"GET", "/portForward/ns/web", websocket("SPDY/3.1+portforward.k8s.io")},
		{"POST", "/portForward/ns/web", spdy},
	} {
		r := httptest.NewRequest(c.method, c.target, nil)
		for k, v := range c.header {
			r.Header[k] = v
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		if rec.Code < 400 {
			t.Errorf("%s %.80s: %d %q, want an error", c.method, c.target, rec.Code, rec.Body)
		}
	}
}

// TestStreamingRequestsGetOnePod: exec, attach and port-forward check their
// pod with GetPod, never by listing the node's pods, so a flood of them
// costs the same on a node of thousands of pods.
func TestStreamingRequestsGetOnePod(t *testing.T) {
	f := newFakeProvider()
	for i := range 1000 {
		f.addPod(fakePod("ns", fmt.Sprintf("pod-%d", i), "app"))
	}
	h := api.PodHandler(f.config(), true)
	paths := []string{
		"/exec/ns/pod-7/nope?command=ls&output=1",
		"/exec/ns/nope/app?command=ls&output=1",
		"/attach/ns/pod-9/uid-other/app?output=1",
		"/portForward/ns/nope",
	}
	for _, p := range paths {
		if code, body := do(t, h, http.MethodPost, p); code != http.StatusNotFound {
			t.Errorf("%s: %d %q, want 404", p, code, body)
		}
	}
	f.mu.Lock()
	lists, gets := f.podLists, f.podGets
	f.mu.Unlock()
	if lists != 0 || gets != len(paths) {
		t.Errorf("%d requests listed the pods %d times and got a pod %d times, want 0 lists and one get each", len(paths), lists, gets)
	}

	// A getter that fails for another reason lets the request through to
	// the upgrade: the handler function has the last word.
	cfg := f.config()
	cfg.GetPod = func(context.Context, string, string) (*corev1.Pod, error) { return nil, errors.New("backend down") }
	if code, body := do(t, api.PodHandler(cfg, true), http.MethodPost, "/exec/ns/nope/app?command=ls&output=1"); code == http.StatusNotFound || strings.Contains(body, "backend down") {
		t.Errorf("exec with a failing getter: %d %q, want it let through to the upgrade", code, body)
	}
}

// Handlers share one route tree, and each still serves its own provider.
func TestPodHandlersServeTheirOwnConfig(t *testing.T) {
	logsOf := func(node string) api.ContainerLogsHandlerFunc {
		return func(context.Context, string, string, string, api.ContainerLogOpts) (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader("logs of " + node)), nil
		}
	}
	handlers := map[string]http.Handler{}
	for _, node := range []string{"a", "b", "c"} {
		handlers[node] = api.PodHandler(api.PodHandlerConfig{GetContainerLogs: logsOf(node)}, false)
	}
	for node, h := range handlers {
		if code, body := do(t, h, "GET", "/containerLogs/ns/web/app"); code != 200 || body != "logs of "+node {
			t.Errorf("node %s's handler answered %d %q", node, code, body)
		}
		if code, _ := do(t, h, "GET", "/runningpods/"); code != http.StatusNotFound {
			t.Errorf("node %s's handler without debug routes answered /runningpods/ with %d", node, code)
		}
	}
	if code, _ := do(t, api.PodHandler(api.PodHandlerConfig{}, true), "GET", "/runningpods/"); code != http.StatusNotImplemented {
		t.Errorf("a handler with debug routes answered /runningpods/ with %d, want 501", code)
	}
}
