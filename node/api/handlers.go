package api

import (
	"net/http"
	"strings"
	"time"

	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/trace"
)

// The Handle* functions serve one kubelet API route each, for a caller that
// builds its own mux. They read the route's {namespace}, {pod}, {uid} and
// {container} wildcards with Request.PathValue, so register them with
// patterns naming those wildcards as AttachPodRoutes does, e.g.
//
//	mux.Handle("POST /exec/{namespace}/{pod}/{container}", api.HandleContainerExec(p.RunInContainer))

// ContainerExecHandlerConfig holds the streaming timeouts of exec and attach.
type ContainerExecHandlerConfig struct {
	// StreamIdleTimeout closes a session idle for that long; 0 means
	// DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds the wait for a client's streams after
	// the upgrade; 0 means DefaultStreamCreationTimeout.
	StreamCreationTimeout time.Duration
}

// ContainerExecHandlerOption configures HandleContainerExec and
// HandleContainerAttach.
type ContainerExecHandlerOption func(*ContainerExecHandlerConfig)

// WithExecStreamCreationTimeout sets ContainerExecHandlerConfig.StreamCreationTimeout.
func WithExecStreamCreationTimeout(dur time.Duration) ContainerExecHandlerOption {
	return func(c *ContainerExecHandlerConfig) { c.StreamCreationTimeout = dur }
}

// WithExecStreamIdleTimeout sets ContainerExecHandlerConfig.StreamIdleTimeout.
func WithExecStreamIdleTimeout(dur time.Duration) ContainerExecHandlerOption {
	return func(c *ContainerExecHandlerConfig) { c.StreamIdleTimeout = dur }
}

// PortForwardHandlerConfig holds the streaming timeouts of port-forward.
type PortForwardHandlerConfig struct {
	// StreamIdleTimeout closes a connection idle for that long; 0 means
	// DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds the wait for a client's streams; 0
	// means DefaultStreamCreationTimeout.
	StreamCreationTimeout time.Duration
}

// PortForwardHandlerOption configures HandlePortForward.
type PortForwardHandlerOption func(*PortForwardHandlerConfig)

// WithPortForwardCreationTimeout sets PortForwardHandlerConfig.StreamCreationTimeout.
func WithPortForwardCreationTimeout(dur time.Duration) PortForwardHandlerOption {
	return func(c *PortForwardHandlerConfig) { c.StreamCreationTimeout = dur }
}

// WithPortForwardStreamIdleTimeout sets PortForwardHandlerConfig.StreamIdleTimeout.
func WithPortForwardStreamIdleTimeout(dur time.Duration) PortForwardHandlerOption {
	return func(c *PortForwardHandlerConfig) { c.StreamIdleTimeout = dur }
}

func execServer(cfg PodHandlerConfig, opts []ContainerExecHandlerOption) *server {
	var c ContainerExecHandlerConfig
	for _, o := range opts {
		o(&c)
	}
	cfg.StreamIdleTimeout, cfg.StreamCreationTimeout = c.StreamIdleTimeout, c.StreamCreationTimeout
	return newServer(cfg)
}

// HandleContainerExec serves /exec/{namespace}/{pod}/{container} (optionally
// with {uid} before {container}) with h.
func HandleContainerExec(h ContainerExecHandlerFunc, opts ...ContainerExecHandlerOption) http.HandlerFunc {
	return execServer(PodHandlerConfig{RunInContainer: h}, opts).exec
}

// HandleContainerAttach serves /attach/{namespace}/{pod}/{container}
// (optionally with {uid} before {container}) with h.
func HandleContainerAttach(h ContainerAttachHandlerFunc, opts ...ContainerExecHandlerOption) http.HandlerFunc {
	return execServer(PodHandlerConfig{AttachToContainer: h}, opts).attach
}

// HandleContainerLogs serves /containerLogs/{namespace}/{pod}/{container}
// with h.
func HandleContainerLogs(h ContainerLogsHandlerFunc) http.HandlerFunc {
	return newServer(PodHandlerConfig{GetContainerLogs: h}).containerLogs
}

// HandlePortForward serves /portForward/{namespace}/{pod} (optionally with
// {uid} at the end) with h.
func HandlePortForward(h PortForwardHandlerFunc, opts ...PortForwardHandlerOption) http.HandlerFunc {
	var c PortForwardHandlerConfig
	for _, o := range opts {
		o(&c)
	}
	return newServer(PodHandlerConfig{
		PortForward:           h,
		StreamIdleTimeout:     c.StreamIdleTimeout,
		StreamCreationTimeout: c.StreamCreationTimeout,
	}).portForward
}

// HandleRunningPods serves the pods getPods lists as a v1 PodList.
func HandleRunningPods(getPods PodListerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) { servePodList(w, r, getPods) }
}

// InstrumentHandler runs h in a span named after the route (its first path
// segment) with the request's method and path as span and log fields.
func InstrumentHandler(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		route, _, _ := strings.Cut(strings.TrimPrefix(r.URL.Path, "/"), "/")
		ctx, span := trace.StartSpan(r.Context(), "kubeletAPI."+route)
		defer span.End()
		ctx = span.WithFields(ctx, log.Fields{"method": r.Method, "uri": r.URL.Path})
		h.ServeHTTP(w, r.WithContext(ctx))
	})
}

// NotFound answers 404 Not Found.
func NotFound(w http.ResponseWriter, r *http.Request) {
	log.G(r.Context()).Debugf("kubelet API: no route for %s %s", r.Method, r.URL.Path)
	http.Error(w, "404 request not found", http.StatusNotFound)
}

// NotImplemented answers 501 Not Implemented.
func NotImplemented(w http.ResponseWriter, r *http.Request) {
	log.G(r.Context()).Debugf("kubelet API: %s %s is not implemented", r.Method, r.URL.Path)
	http.Error(w, "501 not implemented", http.StatusNotImplemented)
}
