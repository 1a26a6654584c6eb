package api

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// Defaults of the streaming timeouts of PodHandlerConfig.
const (
	// DefaultStreamIdleTimeout is how long an exec, attach or port-forward
	// connection may stay idle before it is closed, as the kubelet's
	// --streaming-connection-idle-timeout default.
	DefaultStreamIdleTimeout = 4 * time.Hour
	// DefaultStreamCreationTimeout is how long a client has, after the
	// upgrade, to open the streams it asked for.
	DefaultStreamCreationTimeout = 30 * time.Second
)

// PodHandlerConfig holds the provider's handler functions behind the kubelet
// API routes. A nil function makes its routes answer 501 Not Implemented.
type PodHandlerConfig struct {
	// RunInContainer serves /exec.
	RunInContainer ContainerExecHandlerFunc
	// AttachToContainer serves /attach.
	AttachToContainer ContainerAttachHandlerFunc
	// GetContainerLogs serves /containerLogs.
	GetContainerLogs ContainerLogsHandlerFunc
	// GetPods lists the provider's pods: it serves /runningpods/ (with
	// debug routes) and /pods when GetPodsFromKubernetes is nil.
	GetPods PodListerFunc
	// GetPod, if set, answers exec, attach and port-forward requests for a
	// pod (or container) the provider does not have with 404, before the
	// connection is upgraded. It is asked for the one pod: a request costs
	// the same on a node of ten pods and of ten thousand.
	GetPod PodGetterFunc
	// GetPodsFromKubernetes, if set, serves /pods: the node's pods as
	// Kubernetes has them, as the kubelet answers.
	GetPodsFromKubernetes PodListerFunc
	// GetStatsSummary serves /stats/summary.
	GetStatsSummary PodStatsSummaryHandlerFunc
	// GetMetricsResource serves /metrics/resource; when it is nil, the
	// route is written from GetStatsSummary in the kubelet's format.
	GetMetricsResource PodMetricsResourceHandlerFunc
	// PortForward serves /portForward.
	PortForward PortForwardHandlerFunc

	// StreamIdleTimeout closes an exec, attach or port-forward connection
	// idle for that long; 0 means DefaultStreamIdleTimeout.
	StreamIdleTimeout time.Duration
	// StreamCreationTimeout bounds the wait for a client's streams after
	// the upgrade; 0 means DefaultStreamCreationTimeout.
	StreamCreationTimeout time.Duration
}

// ServeMux is where AttachPodRoutes registers the routes. The patterns use
// the syntax of Go 1.22's http.ServeMux (a method, then a path with
// {wildcards}), which *http.ServeMux satisfies.
type ServeMux interface {
	Handle(pattern string, handler http.Handler)
}

// PodHandler returns a handler serving the kubelet API routes of
// AttachPodRoutes. It does no authentication: wrap it with WithAuth. The
// routes themselves are built once per process and shared by every handler
// PodHandler returns, which finds its own configuration in the request's
// context: a process serving a thousand nodes routes them with one tree.
func PodHandler(p PodHandlerConfig, debug bool) http.Handler {
	return podHandler{s: newServer(p), routes: sharedRoutes(debug)}
}

type podHandler struct {
	s      *server
	routes http.Handler
}

type serverKey struct{}

func (h podHandler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h.routes.ServeHTTP(w, r.WithContext(context.WithValue(r.Context(), serverKey{}, h.s)))
}

// sharedRoutes returns the process's route tree, with or without the debug
// routes; each route serves the configuration its podHandler put in the
// request's context.
func sharedRoutes(debug bool) http.Handler {
	i := 0
	if debug {
		i = 1
	}
	shared[i].once.Do(func() {
		mux := http.NewServeMux()
		attachRoutes(mux, debug, func(r *http.Request) *server { return r.Context().Value(serverKey{}).(*server) })
		shared[i].mux = mux
	})
	return shared[i].mux
}

var shared [2]struct {
	once sync.Once
	mux  *http.ServeMux
}

// AttachPodRoutes registers the kubelet API routes on mux, each wrapped with
// InstrumentHandler:
//
//	GET       /healthz
//	GET       /pods
//	GET       /runningpods/                                  (debug only)
//	GET       /containerLogs/{namespace}/{pod}/{container}
//	GET, POST /exec/{namespace}/{pod}/{container}            (also /{uid}/ before {container})
//	GET, POST /attach/{namespace}/{pod}/{container}          (also /{uid}/ before {container})
//	GET, POST /portForward/{namespace}/{pod}                 (also /{uid} at the end)
//	GET       /stats/summary
//	GET       /metrics/resource
//
// Routes whose handler function is nil answer 501 Not Implemented.
func AttachPodRoutes(p PodHandlerConfig, mux ServeMux, debug bool) {
	s := newServer(p)
	attachRoutes(mux, debug, func(*http.Request) *server { return s })
}

// attachRoutes registers the routes on mux, each serving the server that
// serverOf gives for its request.
func attachRoutes(mux ServeMux, debug bool, serverOf func(*http.Request) *server) {
	mux = instrumentedMux{mux}
	handle := func(pattern string, f func(*server, http.ResponseWriter, *http.Request)) {
		mux.Handle(pattern, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { f(serverOf(r), w, r) }))
	}

	handle("GET /healthz", (*server).healthz)
	handle("GET /pods", (*server).kubernetesPods)
	if debug {
		handle("GET /runningpods", (*server).pods)
		handle("GET /runningpods/{$}", (*server).pods)
	}
	handle("GET /containerLogs/{namespace}/{pod}/{container}", (*server).containerLogs)
	for _, m := range []string{http.MethodGet, http.MethodPost} {
		handle(m+" /exec/{namespace}/{pod}/{container}", (*server).exec)
		handle(m+" /exec/{namespace}/{pod}/{uid}/{container}", (*server).exec)
		handle(m+" /attach/{namespace}/{pod}/{container}", (*server).attach)
		handle(m+" /attach/{namespace}/{pod}/{uid}/{container}", (*server).attach)
		handle(m+" /portForward/{namespace}/{pod}", (*server).portForward)
		handle(m+" /portForward/{namespace}/{pod}/{uid}", (*server).portForward)
	}
	handle("GET /stats/summary", func(s *server, w http.ResponseWriter, r *http.Request) {
		HandlePodStatsSummary(s.cfg.GetStatsSummary)(w, r)
	})
	handle("GET "+MetricsResourceRouteSuffix, func(s *server, w http.ResponseWriter, r *http.Request) {
		metricsResourceHandler(s.cfg.GetStatsSummary, s.cfg.GetMetricsResource)(w, r)
	})
}

// instrumentedMux wraps every handler registered on it with InstrumentHandler.
type instrumentedMux struct{ ServeMux }

func (m instrumentedMux) Handle(pattern string, h http.Handler) {
	m.ServeMux.Handle(pattern, InstrumentHandler(h))
}

var metaPodList = metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}

// server holds a PodHandlerConfig with its defaults applied.
type server struct {
	cfg PodHandlerConfig
}

func newServer(cfg PodHandlerConfig) *server {
	if cfg.StreamIdleTimeout <= 0 {
		cfg.StreamIdleTimeout = DefaultStreamIdleTimeout
	}
	if cfg.StreamCreationTimeout <= 0 {
		cfg.StreamCreationTimeout = DefaultStreamCreationTimeout
	}
	return &server{cfg: cfg}
}

func (s *server) healthz(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, _ = w.Write([]byte("ok"))
}

// kubernetesPods serves /pods from GetPodsFromKubernetes, or GetPods.
func (s *server) kubernetesPods(w http.ResponseWriter, r *http.Request) {
	if s.cfg.GetPodsFromKubernetes == nil {
		s.pods(w, r)
		return
	}
	servePodList(w, r, s.cfg.GetPodsFromKubernetes)
}

func (s *server) pods(w http.ResponseWriter, r *http.Request) {
	servePodList(w, r, s.cfg.GetPods)
}

// servePodList answers with the pods list as a v1 PodList.
func servePodList(w http.ResponseWriter, r *http.Request, list PodListerFunc) {
	if list == nil {
		notImplemented(w, "listing pods")
		return
	}
	pods, err := list(r.Context())
	if err != nil {
		writeError(r.Context(), w, err)
		return
	}
	out := corev1.PodList{
		TypeMeta: metaPodList,
		Items:    make([]corev1.Pod, 0, len(pods)),
	}
	for _, p := range pods {
		if p != nil {
			out.Items = append(out.Items, *p)
		}
	}
	writeJSON(r.Context(), w, &out)
}

// findPod checks, when the provider gets pods by name, that the pod (and
// its container, if given) exists, so that a request for an unknown one
// gets a 404 before any upgrade. Without a getter, or if it fails for
// another reason, it lets the request through: the handler function has
// the last word.
func (s *server) findPod(ctx context.Context, namespace, name, uid, container string) error {
	if s.cfg.GetPod == nil {
		return nil
	}
	p, err := s.cfg.GetPod(ctx, namespace, name)
	switch {
	case errdefs.IsNotFound(err):
		return errdefs.NotFoundf("pod %s/%s not found", namespace, name)
	case err != nil:
		log.G(ctx).WithError(err).Debug("kubelet API: cannot get the pod of a streaming request")
		return nil
	case p == nil:
		return nil
	case uid != "" && p.UID != "" && string(p.UID) != uid:
		return errdefs.NotFoundf("pod %s/%s with UID %s not found", namespace, name, uid)
	case container != "" && !hasContainer(p, container):
		return errdefs.NotFoundf("container %q not found in pod %s/%s", container, namespace, name)
	}
	return nil
}

// hasContainer reports whether the pod's spec has the container; a pod
// whose spec lists no containers at all is given the benefit of the doubt.
func hasContainer(p *corev1.Pod, name string) bool {
	n := 0
	for _, c := range p.Spec.Containers {
		if c.Name == name {
			return true
		}
		n++
	}
	for _, c := range p.Spec.InitContainers {
		if c.Name == name {
			return true
		}
		n++
	}
	for _, c := range p.Spec.EphemeralContainers {
		if c.Name == name {
			return true
		}
		n++
	}
	return n == 0
}

// statusCode maps an error of a handler function to an HTTP status.
func statusCode(err error) int {
	switch {
	case errdefs.IsNotFound(err):
		return http.StatusNotFound
	case errdefs.IsInvalidInput(err):
		return http.StatusBadRequest
	case errdefs.IsNotImplemented(err):
		return http.StatusNotImplemented
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return http.StatusServiceUnavailable
	default:
		return http.StatusInternalServerError
	}
}

// writeError answers with the status of err and its message.
func writeError(ctx context.Context, w http.ResponseWriter, err error) {
	code := statusCode(err)
	if code >= http.StatusInternalServerError {
		log.G(ctx).WithError(err).Warn("kubelet API request failed")
	}
	http.Error(w, err.Error(), code)
}

// notImplemented answers 501 for a capability the provider lacks.
func notImplemented(w http.ResponseWriter, capability string) {
	http.Error(w, capability+" is not implemented by this provider", http.StatusNotImplemented)
}

func writeJSON(ctx context.Context, w http.ResponseWriter, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		writeError(ctx, w, err)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_, _ = w.Write(b)
}
