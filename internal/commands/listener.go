package commands

import (
	"context"
	"net"
	"net/http"
	"strconv"
	"time"

	"github.com/vkubelet/virtual-kubelet/node/api"
)

// The shapes of the kubelet APIs' listeners (--kubelet-listener).
//
// Per node is the default: each node answers every kubelet route at its
// own address, as a kubelet does, so the API server's node proxy
// (/api/v1/nodes/NAME/proxy/stats/summary) reaches that node alone and a
// grant of nodes/proxy on one node reaches that node's pods alone. Shared
// trades both for memory: a thousand nodes scraped by metrics-server hold
// a thousand listeners and TLS connections open (docs/many-nodes.md).
const (
	ListenerPerNode = "per-node"
	ListenerShared  = "shared"
)

// sharedListener reports whether one listener serves the kubelet APIs of
// every node: with --kubelet-listener shared and more than one node, or
// managed nodes, however many there are (one registered node has one
// listener either way).
func (o *Options) sharedListener() bool {
	return o.Server.KubeletListener == ListenerShared && (o.Node.NodeCount > 1 || o.Node.Managed.Enabled())
}

// kubeletPorts is how many ports the kubelet APIs take from --listen-port.
func (o *Options) kubeletPorts() int {
	if o.sharedListener() {
		return 1
	}
	return o.Node.NodeCount
}

// kubeletPort is the port of the kubelet API of the i-th node.
func (o *Options) kubeletPort(i int) int32 {
	if o.sharedListener() {
		return o.Server.ListenPort
	}
	return o.Server.ListenPort + int32(i)
}

// podRouting is how the shared listener finds a pod's node: nil with
// listeners per node.
func (o *Options) podRouting(sh *shared) api.PodNodeFunc {
	if !o.sharedListener() {
		return nil
	}
	return sh.podNode
}

// nodeAnnotations are the annotations of node name's Node that say where
// its kubelet API is: with the shared listener, the path of its resource
// metrics, for metrics-server.
func (o *Options) nodeAnnotations(name string) map[string]string {
	if !o.sharedListener() {
		return nil
	}
	return map[string]string{api.ResourceMetricsPathAnnotation: api.NodeRoutesPrefix(name) + api.MetricsResourceRouteSuffix}
}

// podNode names the node pod namespace/name is bound to, from the
// process's cache of bound pods.
func (sh *shared) podNode(namespace, name string) (string, bool) {
	pod, err := sh.boundPods.Pods(namespace).Get(name)
	if err != nil || pod.Spec.NodeName == "" {
		return "", false
	}
	return pod.Spec.NodeName, true
}

// serveShared starts the one listener of every node's kubelet API, on
// --listen-port, routing by podNode; nodes join it with kubeletAPI.
func (s *servers) serveShared(ctx context.Context, nodeIP string, podNode api.PodNodeFunc) error {
	router, err := api.NewNodeRouter(api.NodeRouterConfig{PodNode: podNode, Authenticator: s.auth, Authorizer: s.authz})
	if err != nil {
		return err
	}
	tlsConfig, stopTLS, err := s.servingTLS(ctx, s.nodes.NodeName, s.nodes.NodeNames(), nodeIP)
	if err != nil {
		return err
	}
	l, err := listen("listen-port", net.JoinHostPort(s.opts.ListenAddress, strconv.Itoa(int(s.opts.ListenPort))))
	if err != nil {
		stopTLS()
		return err
	}
	s.router = router
	s.mu.Lock()
	s.stops = append(s.stops, stopTLS)
	s.mu.Unlock()
	s.serve(ctx, "shared kubelet API", &http.Server{Handler: router, TLSConfig: tlsConfig, ReadHeaderTimeout: 30 * time.Second}, l, true)
	return nil
}
