package api_test

import (
	"context"
	"io"
	"net/http"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

func listing(names ...string) api.PodListerFunc {
	return func(context.Context) ([]*corev1.Pod, error) {
		var pods []*corev1.Pod
		for _, n := range names {
			pods = append(pods, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: n}})
		}
		return pods, nil
	}
}

// TestDebugRoutesAndKubernetesPods: /runningpods/ is a debug route listing
// the provider's pods; /pods lists Kubernetes' when that lister is given.
func TestDebugRoutesAndKubernetesPods(t *testing.T) {
	cfg := api.PodHandlerConfig{GetPods: listing("from-provider"), GetPodsFromKubernetes: listing("from-kubernetes")}
	if code, _ := do(t, api.PodHandler(cfg, false), "GET", "/runningpods/"); code != http.StatusNotFound {
		t.Errorf("/runningpods/ without debug: %d, want 404", code)
	}
	h := api.PodHandler(cfg, true)
	if code, body := do(t, h, "GET", "/runningpods/"); code != 200 || !strings.Contains(body, "from-provider") {
		t.Errorf("/runningpods/ with debug: %d %s", code, body)
	}
	if code, body := do(t, h, "GET", "/pods"); code != 200 || !strings.Contains(body, "from-kubernetes") || strings.Contains(body, "from-provider") {
		t.Errorf("/pods: %d %s", code, body)
	}
	cfg.GetPodsFromKubernetes = nil
	if code, body := do(t, api.PodHandler(cfg, false), "GET", "/pods"); code != 200 || !strings.Contains(body, "from-provider") {
		t.Errorf("/pods falling back to GetPods: %d %s", code, body)
	}
}

// TestHandleFuncsOnOwnMux: the single-route handlers work on a mux the
// caller builds, with its own patterns naming the wildcards.
func TestHandleFuncsOnOwnMux(t *testing.T) {
	mux := http.NewServeMux()
	mux.Handle("GET /logs/{namespace}/{pod}/{container}", api.InstrumentHandler(api.HandleContainerLogs(
		func(_ context.Context, ns, pod, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
			return io.NopCloser(strings.NewReader(ns + "/" + pod + "/" + container + "\n")), nil
		})))
	mux.Handle("GET /list", api.HandleRunningPods(listing("a", "b")))
	mux.HandleFunc("GET /nope", api.NotImplemented)
	mux.HandleFunc("/", api.NotFound)

	for _, tc := range []struct {
		target, want string
		code         int
	}{
		{"/logs/ns/web/app", "ns/web/app\n", 200},
		{"/list", `"name":"b"`, 200},
		{"/nope", "not implemented", 501},
		{"/elsewhere", "not found", 404},
	} {
		code, body := do(t, mux, "GET", tc.target)
		if code != tc.code || !strings.Contains(body, tc.want) {
			t.Errorf("%s: %d %q, want %d containing %q", tc.target, code, body, tc.code, tc.want)
		}
	}

	// Exec without a command is refused before any upgrade, whatever the
	// options.
	exec := api.HandleContainerExec(func(context.Context, string, string, string, []string, api.AttachIO) error { return nil },
		api.WithExecStreamIdleTimeout(0), api.WithExecStreamCreationTimeout(0))
	if code, _ := do(t, exec, "POST", "/exec/ns/web/app"); code != http.StatusBadRequest {
		t.Errorf("exec without command: %d, want 400", code)
	}
}
