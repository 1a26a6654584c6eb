package api_test

import (
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"

	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

// FuzzStreamRequest: whatever path and query a client sends to exec,
// attach or port-forward, the kubelet API does not panic and validates the
// parameters before it upgrades the connection: a bad one is answered 400
// naming it, a pod or container that is not there 404, and only a request
// that is valid gets as far as the upgrade (which a test recorder cannot
// do: 500, "cannot be hijacked").
func FuzzStreamRequest(f *testing.F) {
	for _, seed := range []struct {
		target    string
		websocket bool
	}{
		{"/exec/ns/web/app?command=ls&command=-l&output=1&error=1", false},
		{"/exec/ns/web/uid-web/app?command=sh&input=1&tty=1", true},
		{"/exec/ns/web/app?output=1", false},
		{"/exec/ns/web/app?command=ls", false},
		{"/exec/ns/web/nope?command=ls&output=1", false},
		{"/attach/ns/web/app?output=true&input=maybe", false},
		{"/attach/ns/gone/app?output=1", false},
		{"/portForward/ns/web?port=80,8080", true},
		{"/portForward/ns/web/uid-web?port=0", true},
		{"/portForward/ns/web?port=65536&port=", true},
		{"/portForward/ns/web", false},
	} {
		f.Add(seed.target, seed.websocket)
	}
	p := newFakeProvider()
	p.addPod(fakePod("ns", "web", "app"))
	h := api.PodHandler(p.config(), true)
	f.Fuzz(func(t *testing.T, target string, websocket bool) {
		r, err := http.NewRequest(http.MethodGet, target, nil)
		if err != nil || r.URL.Path == "" || r.URL.Path[0] != '/' {
			return // no request line net/http would pass on
		}
		if websocket {
			r.Header.Set("Connection", "Upgrade")
			r.Header.Set("Upgrade", "websocket")
		}
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, r)
		code, body := rec.Code, rec.Body.String()
		q := r.URL.Query()
		switch {
		case code == http.StatusInternalServerError && strings.Contains(body, "cannot be hijacked"):
			// Valid: what it asked for is there.
			if strings.HasPrefix(r.URL.Path, "/exec/") && len(q["command"]) == 0 {
				t.Fatalf("%s: an exec without a command reached the upgrade", target)
			}
			if strings.HasPrefix(r.URL.Path, "/portForward/") && websocket {
				for _, ports := range q["port"] {
					for _, port := range strings.Split(ports, ",") {
						if n, err := strconv.ParseUint(port, 10, 16); err != nil || n == 0 {
							t.Fatalf("%s: port %q reached the upgrade", target, port)
						}
					}
				}
			}
		case code >= http.StatusInternalServerError:
			t.Fatalf("%s: %d %s", target, code, body)
		case code == http.StatusBadRequest:
			named := false
			for _, p := range []string{"command", "input", "stdin", "output", "stdout", "error", "stderr", "tty", "port"} {
				named = named || strings.Contains(body, p)
			}
			if !named {
				t.Fatalf("%s: 400 naming no parameter: %s", target, body)
			}
		}
	})
}

// FuzzStatsSummary: whatever stats summary a provider or plugin hands over
// (a plugin sends it as JSON), /stats/summary and /metrics/resource serve
// it without panicking, and /metrics/resource is Prometheus text that
// parses.
func FuzzStatsSummary(f *testing.F) {
	for _, seed := range []string{
		`{"node": {"nodeName": "vk0", "startTime": "2026-01-02T03:04:05Z", "cpu": {"time": "2026-01-02T03:04:05Z", "usageNanoCores": 1000, "usageCoreNanoSeconds": 5},` +
			` "memory": {"time": "2026-01-02T03:04:05Z", "workingSetBytes": 1024}},` +
			` "pods": [{"podRef": {"name": "web", "namespace": "ns", "uid": "u"}, "startTime": "2026-01-02T03:04:05Z",` +
			` "containers": [{"name": "app", "startTime": "2026-01-02T03:04:05Z", "cpu": {"time": "2026-01-02T03:04:05Z", "usageCoreNanoSeconds": 7}, "memory": {"workingSetBytes": 9}}],` +
			` "cpu": {"usageCoreNanoSeconds": 7}, "memory": {"workingSetBytes": 9}}]}`,
		`{"pods": [{"containers": [{}]}, {}]}`,
		`{"node": {"cpu": {}, "memory": {}, "swap": {}}}`,
		`{"pods": [{"podRef": {"name": "a\"b\n"}, "containers": [{"name": "}", "cpu": {"usageCoreNanoSeconds": 1}}]}]}`,
		`{}`,
	} {
		f.Add([]byte(seed))
	}
	// The summary the handler serves: each input's, decoded afresh on each
	// request as a plugin's answer is (the fuzz function runs one input at
	// a time).
	var current []byte
	h := api.PodHandler(api.PodHandlerConfig{
		GetStatsSummary: func(context.Context) (*statsv1alpha1.Summary, error) {
			var s statsv1alpha1.Summary
			err := json.Unmarshal(current, &s)
			return &s, err
		},
	}, false)
	f.Fuzz(func(t *testing.T, data []byte) {
		if json.Unmarshal(data, new(statsv1alpha1.Summary)) != nil {
			return // the grpc provider refuses it, naming the call
		}
		current = data
		for _, target := range []string{"/stats/summary", "/stats/summary?only_cpu_and_memory=true", api.MetricsResourceRouteSuffix} {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, target, nil))
			if rec.Code != http.StatusOK {
				t.Fatalf("%s: %d %s", target, rec.Code, rec.Body)
			}
			if target != api.MetricsResourceRouteSuffix {
				continue
			}
			parser := expfmt.NewTextParser(model.LegacyValidation)
			if _, err := parser.TextToMetricFamilies(strings.NewReader(rec.Body.String())); err != nil {
				t.Fatalf("%s is not Prometheus text: %v\n%s", target, err, rec.Body)
			}
		}
	})
}
