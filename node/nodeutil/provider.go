package nodeutil

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	corev1listers "k8s.io/client-go/listers/core/v1"
	"k8s.io/client-go/tools/record"
	statsv1alpha1 "k8s.io/kubelet/pkg/apis/stats/v1alpha1"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/api"
	"github.com/vkubelet/virtual-kubelet/node/intern"
	"github.com/vkubelet/virtual-kubelet/node/log"
)

// Provider is a pod lifecycle handler that also serves the kubelet API's
// logs, exec, attach, port-forward and stats, as NewNode expects.
type Provider interface {
	node.PodLifecycleHandler

	// GetContainerLogs serves kubectl logs.
	GetContainerLogs(ctx context.Context, namespace, podName, containerName string, opts api.ContainerLogOpts) (io.ReadCloser, error)
	// RunInContainer serves kubectl exec.
	RunInContainer(ctx context.Context, namespace, podName, containerName string, cmd []string, attach api.AttachIO) error
	// AttachToContainer serves kubectl attach.
	AttachToContainer(ctx context.Context, namespace, podName, containerName string, attach api.AttachIO) error
	// GetStatsSummary serves /stats/summary.
	GetStatsSummary(context.Context) (*statsv1alpha1.Summary, error)
	// GetMetricsResource returns the /metrics/resource families.
	GetMetricsResource(context.Context) ([]*dto.MetricFamily, error)
	// PortForward serves kubectl port-forward.
	PortForward(ctx context.Context, namespace, pod string, port int32, stream io.ReadWriteCloser) error
}

// ProviderConfig is what NewNode hands the provider it builds: listers of
// the informers the node starts, and the node's spec, which the provider
// may fill in (capacity, addresses, conditions) before it is registered.
type ProviderConfig struct {
	Pods       corev1listers.PodLister
	ConfigMaps corev1listers.ConfigMapLister
	Secrets    corev1listers.SecretLister
	Services   corev1listers.ServiceLister

	// Node is NodeConfig.NodeSpec.
	Node *corev1.Node
}

// NewProviderFunc builds the provider of a node. A nil node.NodeProvider
// means node.NaiveNodeProvider.
type NewProviderFunc func(ProviderConfig) (Provider, node.NodeProvider, error)

// NodeConfig configures NewNode.
type NodeConfig struct {
	// Client talks to the API server; if nil, one is made with
	// ClientsetFromEnv(KubeconfigPath).
	Client kubernetes.Interface

	// NodeSpec is the Node to register; its name is NewNode's.
	NodeSpec corev1.Node

	// KubeconfigPath is used when Client is nil.
	KubeconfigPath string

	// InformerResyncPeriod is the informers' resync period (default none).
	InformerResyncPeriod time.Duration

	// HTTPListenAddr is where the kubelet API is served, over TLS, when
	// Handler is set (default ":10250").
	HTTPListenAddr string

	// Handler serves the kubelet API; AttachProviderRoutes sets it if nil.
	// Without one no server is started.
	Handler http.Handler

	// StreamIdleTimeout and StreamCreationTimeout are the provider routes'
	// streaming timeouts (see api.PodHandlerConfig).
	StreamIdleTimeout     time.Duration
	StreamCreationTimeout time.Duration

	// DebugHTTP adds the debug routes (/runningpods/).
	DebugHTTP bool

	// TLSConfig is the server's; required when a Handler is served (see
	// WithTLSConfig).
	TLSConfig *tls.Config

	// EventRecorder, if set, records the pod controller's events.
	EventRecorder record.EventRecorder

	// NumWorkers is the number of workers of each pod controller queue
	// (default 10).
	NumWorkers int

	// NodeStatusUpdateErrorHandler is given to the NodeController (see
	// node.WithNodeStatusUpdateErrorHandler).
	NodeStatusUpdateErrorHandler node.ErrorHandler

	// SkipDownwardAPIResolution hands pods to the provider with their env
	// references unresolved (see node.PodControllerConfig).
	SkipDownwardAPIResolution bool

	// routeAttacher registers the provider's routes, set by
	// AttachProviderRoutes.
	routeAttacher func(node.Capabilities, NodeConfig, corev1listers.PodLister)
}

// NodeOpt adjusts a NodeConfig.
type NodeOpt func(c *NodeConfig) error

// DefaultHTTPListenAddr is the kubelet API's address unless configured: the
// kubelet's port on every interface.
const DefaultHTTPListenAddr = ":10250"

// WithClient sets NodeConfig.Client.
func WithClient(c kubernetes.Interface) NodeOpt {
	return func(cfg *NodeConfig) error {
		cfg.Client = c
		return nil
	}
}

// WithNodeConfig replaces the whole NodeConfig with c (later options still
// apply on top). What AttachProviderRoutes set is kept.
func WithNodeConfig(c NodeConfig) NodeOpt {
	return func(cfg *NodeConfig) error {
		attacher := cfg.routeAttacher
		*cfg = c
		if cfg.routeAttacher == nil {
			cfg.routeAttacher = attacher
		}
		return nil
	}
}

// WithTLSConfig sets NodeConfig.TLSConfig to a config with TLS 1.2 or later,
// DefaultServerCiphers and client certificates requested (api.WithAuth and
// WebhookAuth verify them), adjusted by opts such as WithKeyPairFromPath and
// WithCAFromPath.
func WithTLSConfig(opts ...func(*tls.Config) error) NodeOpt {
	return func(cfg *NodeConfig) error {
		c := &tls.Config{
			MinVersion:   tls.VersionTLS12,
			CipherSuites: DefaultServerCiphers(),
			ClientAuth:   tls.RequestClientCert,
		}
		for _, o := range opts {
			if err := o(c); err != nil {
				return err
			}
		}
		cfg.TLSConfig = c
		return nil
	}
}

// AttachProviderRoutes registers the provider's kubelet API routes on mux
// (see api.AttachPodRoutes) once NewNode has built the provider; mux becomes
// NodeConfig.Handler unless one is set.
func AttachProviderRoutes(mux api.ServeMux) NodeOpt {
	return func(cfg *NodeConfig) error {
		cfg.routeAttacher = func(caps node.Capabilities, cfg NodeConfig, pods corev1listers.PodLister) {
			routes := caps.PodHandlerConfig()
			routes.GetPodsFromKubernetes = func(context.Context) ([]*corev1.Pod, error) { return pods.List(labels.Everything()) }
			routes.StreamIdleTimeout, routes.StreamCreationTimeout = cfg.StreamIdleTimeout, cfg.StreamCreationTimeout
			api.AttachPodRoutes(routes, mux, cfg.DebugHTTP)
		}
		if h, ok := mux.(http.Handler); ok && cfg.Handler == nil {
			cfg.Handler = h
		}
		return nil
	}
}

// NewNode builds a node named name around the provider newProvider returns;
// nothing is started until Run. The node's pods, ConfigMaps, Secrets and
// Services are watched by informers Run starts, whose listers the provider
// gets.
func NewNode(name string, newProvider NewProviderFunc, opts ...NodeOpt) (*Node, error) {
	if name == "" {
		return nil, errors.New("nodeutil: a node name is required")
	}
	if newProvider == nil {
		return nil, errors.New("nodeutil: a NewProviderFunc is required")
	}
	cfg := NodeConfig{HTTPListenAddr: DefaultHTTPListenAddr}
	for _, o := range opts {
		if err := o(&cfg); err != nil {
			return nil, fmt.Errorf("nodeutil: %w", err)
		}
	}
	cfg.NodeSpec.Name = name
	if cfg.Client == nil {
		c, err := ClientsetFromEnv(cfg.KubeconfigPath)
		if err != nil {
			return nil, fmt.Errorf("nodeutil: %w", err)
		}
		cfg.Client = c
	}
	if cfg.Handler != nil && cfg.HTTPListenAddr != "" && cfg.TLSConfig == nil {
		return nil, errors.New("nodeutil: the kubelet API is served over TLS: set a TLSConfig (WithTLSConfig) or no Handler")
	}

	podFactory := informers.NewSharedInformerFactoryWithOptions(cfg.Client, cfg.InformerResyncPeriod,
		PodInformerFilter(name), informers.WithTransform(TrimPodsWith(intern.New())))
	refFactory := NewInformerFactory(cfg.Client, cfg.InformerResyncPeriod)
	core := refFactory.Core().V1()
	pods := podFactory.Core().V1().Pods().Lister()
	p, np, err := newProvider(ProviderConfig{
		Pods:       pods,
		ConfigMaps: core.ConfigMaps().Lister(),
		Secrets:    core.Secrets().Lister(),
		Services:   core.Services().Lister(),
		Node:       &cfg.NodeSpec,
	})
	if err != nil {
		return nil, fmt.Errorf("nodeutil: provider: %w", err)
	}
	if p == nil {
		return nil, errors.New("nodeutil: the NewProviderFunc returned no provider")
	}
	caps := node.CapabilitiesOf(p)
	if cfg.routeAttacher != nil {
		cfg.routeAttacher(caps, cfg, pods)
	}

	var nodeOpts []node.NodeControllerOpt
	if cfg.NodeStatusUpdateErrorHandler != nil {
		nodeOpts = append(nodeOpts, node.WithNodeStatusUpdateErrorHandler(cfg.NodeStatusUpdateErrorHandler))
	}
	n, err := New(Config{
		Client:               cfg.Client,
		Node:                 &cfg.NodeSpec,
		Capabilities:         &caps,
		NodeProvider:         np,
		Workers:              cfg.NumWorkers,
		InformerResyncPeriod: cfg.InformerResyncPeriod,
		NodeOptions:          nodeOpts,
		InformerFactory:      refFactory,
		PodInformerFactory:   podFactory,
		EventRecorder:        cfg.EventRecorder,
		ConfigurePodController: func(c *node.PodControllerConfig) {
			c.SkipDownwardAPIResolution = cfg.SkipDownwardAPIResolution
		},
	})
	if err != nil {
		return nil, err
	}
	if cfg.Handler != nil && cfg.HTTPListenAddr != "" {
		n.serve = func(ctx context.Context) error { return serveTLS(ctx, cfg.HTTPListenAddr, cfg.TLSConfig, cfg.Handler) }
	}
	return n, nil
}

// serveTLS serves h on addr until ctx ends, then shuts the server down.
func serveTLS(ctx context.Context, addr string, tlsCfg *tls.Config, h http.Handler) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("kubelet API: %w", err)
	}
	srv := &http.Server{Handler: h, TLSConfig: tlsCfg, ReadHeaderTimeout: 30 * time.Second}
	stop := context.AfterFunc(ctx, func() {
		shutdown, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = srv.Shutdown(shutdown)
	})
	defer stop()
	log.G(ctx).WithField("addr", ln.Addr().String()).Info("serving the kubelet API")
	if err := srv.Serve(tls.NewListener(ln, tlsCfg)); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("kubelet API: %w", err)
	}
	return nil
}
