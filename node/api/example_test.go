package api_test

import (
	"context"
	"fmt"
	"io"
	"net/http/httptest"
	"strings"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// A provider that only lists pods and serves logs: the other routes answer
// 501, unknown containers 404, malformed queries 400.
func ExamplePodHandler() {
	h := api.PodHandler(api.PodHandlerConfig{
		GetPods: func(context.Context) ([]*corev1.Pod, error) {
			return []*corev1.Pod{{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "hello"}}}, nil
		},
		GetContainerLogs: func(_ context.Context, ns, pod, container string, opts api.ContainerLogOpts) (io.ReadCloser, error) {
			if container != "app" {
				return nil, errdefs.NotFoundf("container %q not found in pod %s/%s", container, ns, pod)
			}
			return io.NopCloser(strings.NewReader("first line\nsecond line\n")), nil
		},
	}, false)
	for _, target := range []string{
		"/healthz",
		"/containerLogs/default/hello/app",
		"/containerLogs/default/hello/app?limitBytes=5",
		"/containerLogs/default/hello/db",
		"/containerLogs/default/hello/app?tailLines=-1",
		"/exec/default/hello/app?command=ls&output=1",
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		fmt.Printf("%s\n  %d %q\n", target, rec.Code, rec.Body.String())
	}
	// Output:
	// /healthz
	//   200 "ok"
	// /containerLogs/default/hello/app
	//   200 "first line\nsecond line\n"
	// /containerLogs/default/hello/app?limitBytes=5
	//   200 "first"
	// /containerLogs/default/hello/db
	//   404 "container \"db\" not found in pod default/hello\n"
	// /containerLogs/default/hello/app?tailLines=-1
	//   400 "tailLines: must not be negative, got -1\n"
	// /exec/default/hello/app?command=ls&output=1
	//   501 "exec is not implemented by this provider\n"
}
