package api_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authentication/user"
	"k8s.io/apiserver/pkg/authorization/authorizer"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

// Two nodes behind one listener: a pod route goes to the pod's node, a
// node route to the node its path names.
func ExampleNodeRouter() {
	pods := map[string]string{"default/web": "vk-1"} // from an informer's cache, in a daemon
	rt, err := api.NewNodeRouter(api.NodeRouterConfig{
		PodNode: func(namespace, name string) (string, bool) {
			node, ok := pods[namespace+"/"+name]
			return node, ok
		},
		// In a daemon: NewAuth's, which asks the API server.
		Authenticator: authenticator.RequestFunc(func(*http.Request) (*authenticator.Response, bool, error) {
			return &authenticator.Response{User: &user.DefaultInfo{Name: "system:kube-apiserver"}}, true, nil
		}),
		Authorizer: authorizer.AuthorizerFunc(func(_ context.Context, a authorizer.Attributes) (authorizer.Decision, string, error) {
			return authorizer.DecisionAllow, "", nil
		}),
	})
	if err != nil {
		panic(err)
	}
	for _, name := range []string{"vk-0", "vk-1"} {
		_, _ = rt.Register(name, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			fmt.Fprintf(w, "%s serves %s", name, r.URL.Path)
		}))
	}
	fmt.Println("annotation:", api.ResourceMetricsPathAnnotation+"="+api.NodeRoutesPrefix("vk-0")+api.MetricsResourceRouteSuffix)
	for _, target := range []string{
		"/containerLogs/default/web/app",
		"/nodes/vk-0/metrics/resource",
		"/containerLogs/default/gone/app",
		"/stats/summary",
	} {
		rec := httptest.NewRecorder()
		rt.ServeHTTP(rec, httptest.NewRequest("GET", target, nil))
		fmt.Printf("%s\n  %d %s", target, rec.Code, rec.Body.String())
		if rec.Code == 200 {
			fmt.Println()
		}
	}
	// Output:
	// annotation: metrics.k8s.io/resource-metrics-path=/nodes/vk-0/metrics/resource
	// /containerLogs/default/web/app
	//   200 vk-1 serves /containerLogs/default/web/app
	// /nodes/vk-0/metrics/resource
	//   200 vk-0 serves /metrics/resource
	// /containerLogs/default/gone/app
	//   404 pod default/gone not found
	// /stats/summary
	//   404 /stats/summary: this listener serves the kubelet APIs of several nodes; a node's own routes are under /nodes/{node} (/nodes/{node}/stats/summary)
}
