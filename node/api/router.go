package api

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"k8s.io/apiserver/pkg/authentication/authenticator"
	"k8s.io/apiserver/pkg/authorization/authorizer"
)

// ResourceMetricsPathAnnotation is the Node annotation metrics-server (0.7
// and later) takes the path of a node's resource metrics from, in place of
// /metrics/resource; the address and port stay those of the Node's status.
// A NodeRouter's nodes carry NodeRoutesPrefix(name) +
// MetricsResourceRouteSuffix in it.
const ResourceMetricsPathAnnotation = "metrics.k8s.io/resource-metrics-path"

// NodeRoutesPrefix is the path under which a NodeRouter serves the node
// routes (/stats/summary, /metrics/resource, /pods, ...) of node name.
func NodeRoutesPrefix(name string) string { return "/nodes/" + name }

// podRoutes are the first segments of the kubelet API routes that name a
// pod, as /{route}/{namespace}/{pod}/...: a NodeRouter hands them to the
// pod's node.
var podRoutes = []string{"containerLogs", "exec", "attach", "portForward", "run", "checkpoint"}

// PodNodeFunc names the node pod namespace/name is bound to; found is false
// when there is no such pod (or it is bound to none).
type PodNodeFunc func(namespace, name string) (node string, found bool)

// NodeRouterConfig configures a NodeRouter.
type NodeRouterConfig struct {
	// PodNode finds the node of the pod a pod route names, typically
	// from an informer's cache of the bound pods. Required.
	PodNode PodNodeFunc
	// Authenticator and Authorizer check every request as WithAuth
	// does, with the attributes of NodeRequestAttributes for the node the
	// request is routed to. Both required.
	Authenticator authenticator.Request
	Authorizer    authorizer.Authorizer
}

// NodeRouter serves the kubelet APIs of many nodes on one listener, each
// node's handler registered with Register. The API server reaches a node
// by its address, so every node's Node points at the one listener, and the
// router tells the nodes apart by the request:
//
//   - a pod route (/containerLogs, /exec, /attach, /portForward, /run,
//     /checkpoint, each /{namespace}/{pod}/...) goes to the node the pod is
//     bound to, from NodeRouterConfig.PodNode;
//   - a node route goes to the node its path names: /nodes/NAME/stats/summary
//     is NAME's /stats/summary (metrics-server finds NAME's resource metrics
//     through ResourceMetricsPathAnnotation);
//   - /healthz is answered by the router itself.
//
// A request is authorized for the node it goes to, as by that node's own
// listener: a SubjectAccessReview on nodes/proxy (stats, metrics, ...) naming
// that node. A request that reaches no node (an unknown pod, a pod or node
// not served here, a node route without a node) answers 404 saying why, but
// only to a caller authorized for the request on every node (a review with
// no node name): others get 401 or 403, and learn nothing of the pods.
type NodeRouter struct {
	cfg    NodeRouterConfig
	routes *http.ServeMux
	// anyNode authorizes the requests that reach no node.
	anyNode Auth

	mu    sync.RWMutex
	nodes map[string]*routedNode
}

// routedNode is one registered node.
type routedNode struct {
	// handler is the node's handler behind authentication and its own
	// authorization.
	handler http.Handler

	mu sync.Mutex
	// gone: the node is unregistered, its requests are cancelled.
	gone bool
	// inflight cancels the node's requests in flight; nil while there is
	// none, so that an idle node of thousands holds no set (nor, as a
	// context per node would, a done channel and a map of children).
	inflight map[*context.CancelFunc]struct{}
}

// NewNodeRouter returns a router with no node.
func NewNodeRouter(cfg NodeRouterConfig) (*NodeRouter, error) {
	if cfg.PodNode == nil || cfg.Authenticator == nil || cfg.Authorizer == nil {
		return nil, errors.New("node router: PodNode, Authenticator and Authorizer are required")
	}
	rt := &NodeRouter{cfg: cfg, routes: http.NewServeMux(), anyNode: NewAuthFrom(cfg.Authenticator, cfg.Authorizer, ""), nodes: map[string]*routedNode{}}
	rt.routes.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok"))
	})
	rt.routes.HandleFunc("/nodes/{node}/{path...}", rt.nodeRoute)
	for _, route := range podRoutes {
		rt.routes.HandleFunc("/"+route+"/{namespace}/{pod}", rt.podRoute)
		rt.routes.HandleFunc("/"+route+"/{namespace}/{pod}/{rest...}", rt.podRoute)
	}
	rt.routes.HandleFunc("/", func(w http.ResponseWriter, r *http.Request) {
		rt.miss(w, r, fmt.Sprintf("%s: this listener serves the kubelet APIs of several nodes; a node's own routes are under %s (%s%s)",
			r.URL.Path, NodeRoutesPrefix("{node}"), NodeRoutesPrefix("{node}"), r.URL.Path))
	})
	return rt, nil
}

// Register serves node name's kubelet API with h (such as PodHandler's,
// without authentication: the router adds it), until unregister is
// called; the node's requests in flight are then cancelled. A name served
// already is an error: unregister it first.
func (rt *NodeRouter) Register(name string, h http.Handler) (unregister func(), err error) {
	if name == "" {
		return nil, errors.New("node router: a node name is required")
	}
	n := &routedNode{handler: WithAuth(h, NewAuthFrom(rt.cfg.Authenticator, rt.cfg.Authorizer, name))}
	rt.mu.Lock()
	defer rt.mu.Unlock()
	if _, ok := rt.nodes[name]; ok {
		return nil, fmt.Errorf("node router: node %s is served already", name)
	}
	rt.nodes[name] = n
	return sync.OnceFunc(func() {
		rt.mu.Lock()
		if rt.nodes[name] == n {
			delete(rt.nodes, name)
		}
		rt.mu.Unlock()
		n.unregistered()
	}), nil
}

// node is the registered node name, or nil.
func (rt *NodeRouter) node(name string) *routedNode {
	rt.mu.RLock()
	defer rt.mu.RUnlock()
	return rt.nodes[name]
}

// ServeHTTP hands r to the node it is for (see NodeRouter).
func (rt *NodeRouter) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	rt.routes.ServeHTTP(w, r)
}

// podRoute hands a pod route to the pod's node.
func (rt *NodeRouter) podRoute(w http.ResponseWriter, r *http.Request) {
	ns, pod := r.PathValue("namespace"), r.PathValue("pod")
	name, found := rt.cfg.PodNode(ns, pod)
	if !found {
		rt.miss(w, r, fmt.Sprintf("pod %s/%s not found", ns, pod))
		return
	}
	n := rt.node(name)
	if n == nil {
		rt.miss(w, r, fmt.Sprintf("pod %s/%s is on node %s, which this listener does not serve", ns, pod, name))
		return
	}
	n.serve(w, r)
}

// nodeRoute hands /nodes/NAME/PATH to node NAME as /PATH.
func (rt *NodeRouter) nodeRoute(w http.ResponseWriter, r *http.Request) {
	name := r.PathValue("node")
	inner := stripNodePrefix(r)
	if first, _, _ := strings.Cut(r.PathValue("path"), "/"); slices.Contains(podRoutes, first) {
		rt.miss(w, inner, fmt.Sprintf("%s is not served under %s: pod routes are served at /%s/{namespace}/{pod}/..., by the pod's node",
			r.URL.Path, NodeRoutesPrefix(name), first))
		return
	}
	n := rt.node(name)
	if n == nil {
		rt.miss(w, inner, fmt.Sprintf("node %s is not served by this listener", name))
		return
	}
	n.serve(w, inner)
}

// stripNodePrefix is r with /nodes/NAME taken off its path.
func stripNodePrefix(r *http.Request) *http.Request {
	inner := new(http.Request)
	*inner = *r
	u := *r.URL
	u.Path, u.RawPath = "/"+r.PathValue("path"), ""
	inner.URL = &u
	return inner
}

// miss answers a request that reaches no node: 404 with why, to a caller
// authorized for the request on every node.
func (rt *NodeRouter) miss(w http.ResponseWriter, r *http.Request, why string) {
	WithAuth(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) {
		http.Error(w, why, http.StatusNotFound)
	}), rt.anyNode).ServeHTTP(w, r)
}

// serve serves r with the node's handler, cancelled if the node is
// unregistered meanwhile.
func (n *routedNode) serve(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithCancel(r.Context())
	defer cancel()
	n.mu.Lock()
	if n.gone {
		cancel()
	} else {
		if n.inflight == nil {
			n.inflight = map[*context.CancelFunc]struct{}{}
		}
		n.inflight[&cancel] = struct{}{}
	}
	n.mu.Unlock()
	defer n.done(&cancel)
	n.handler.ServeHTTP(w, r.WithContext(ctx))
}

// done forgets the request that cancel cancels.
func (n *routedNode) done(cancel *context.CancelFunc) {
	n.mu.Lock()
	defer n.mu.Unlock()
	delete(n.inflight, cancel)
	if len(n.inflight) == 0 {
		n.inflight = nil
	}
}

// unregistered cancels the node's requests in flight, and those that
// reach it later.
func (n *routedNode) unregistered() {
	n.mu.Lock()
	defer n.mu.Unlock()
	n.gone = true
	for cancel := range n.inflight {
		(*cancel)()
	}
	n.inflight = nil
}
