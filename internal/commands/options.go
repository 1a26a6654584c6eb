package commands

import (
	"errors"
	"fmt"
	"net"
	"os"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vkubelet/virtual-kubelet/internal/logging"
	"github.com/vkubelet/virtual-kubelet/internal/provider"
	"github.com/vkubelet/virtual-kubelet/internal/tracing"
)

// Options are the daemon's settings, from flags and environment.
type Options struct {
	Provider       string
	ProviderConfig string

	NodeName        string
	NodeCount       int
	OperatingSystem string
	NodeIP          string
	DisableTaint    bool
	TaintKey        string
	TaintValue      string
	TaintEffect     string
	EnableNodeLease bool
	StartupTimeout  time.Duration

	Kubeconfig         string
	KubeAPIQPS         float32
	KubeAPIBurst       int
	KubeAPIContentType string
	PodSyncWorkers     int
	FullResyncPeriod   time.Duration
	ClusterDomain      string

	ListenAddress         string
	ListenPort            int32
	TLSCertFile           string
	TLSKeyFile            string
	RotateServerCerts     bool
	CertDir               string
	ClientCAFile          string
	AnonymousAuth         bool
	AuthorizationMode     string
	StreamIdleTimeout     time.Duration
	StreamCreationTimeout time.Duration
	MetricsAddr           string
	EnableProfiling       bool

	LogLevel            string
	TraceExporters      []string
	TraceSampleRate     string
	TraceServiceName    string
	TraceTags           map[string]string
	JaegerEndpoint      string
	JaegerAgentEndpoint string
}

// Authorization modes of the kubelet API.
const (
	AuthzWebhook     = "Webhook"
	AuthzAlwaysAllow = "AlwaysAllow"
)

// Default client rate limits. The kubelet's are 50 QPS and a burst of 100;
// a virtual node may carry thousands of pods and must not be throttled
// below what the API server can take. API Priority and Fairness protects
// the API server from a misbehaving client, so the client-side limit here
// only guards against runaway loops.
const (
	DefaultKubeAPIQPS   = 500
	DefaultKubeAPIBurst = 1000
)

// flagGroup is a titled set of flags, shown together in --help.
type flagGroup struct {
	title string
	fs    *pflag.FlagSet
}

// envFlag is a flag that falls back to an environment variable.
type envFlag struct{ flag, env string }

// envFlags are the flags with environment fallbacks, the names used in the
// kubelet and virtual-kubelet world.
var envFlags = []envFlag{
	{"nodename", "DEFAULT_NODE_NAME"},
	{"node-ip", "VKUBELET_POD_IP"},
	{"kubeconfig", "KUBECONFIG"},
	{"listen-port", "KUBELET_PORT"},
	{"taint-key", "VKUBELET_TAINT_KEY"},
	{"taint-value", "VKUBELET_TAINT_VALUE"},
	{"taint-effect", "VKUBELET_TAINT_EFFECT"},
	{"tls-cert-file", "APISERVER_CERT_LOCATION"},
	{"tls-private-key-file", "APISERVER_KEY_LOCATION"},
	{"client-ca-file", "APISERVER_CA_CERT_LOCATION"},
	{"log-level", "LOG_LEVEL"},
	{"jaeger-endpoint", "JAEGER_ENDPOINT"},
	{"jaeger-agent-endpoint", "JAEGER_AGENT_ENDPOINT"},
}

func envFor(flag string) string {
	for _, e := range envFlags {
		if e.flag == flag {
			return e.env
		}
	}
	return ""
}

// flagGroups defines every flag, bound to o, in the groups --help shows.
func (o *Options) flagGroups() []flagGroup {
	group := func(title string, add func(fs *pflag.FlagSet)) flagGroup {
		fs := pflag.NewFlagSet(title, pflag.ContinueOnError)
		add(fs)
		fs.VisitAll(func(f *pflag.Flag) {
			if env := envFor(f.Name); env != "" {
				f.Usage += " (env " + env + ")"
			}
		})
		return flagGroup{title, fs}
	}
	hostname, _ := os.Hostname()
	return []flagGroup{
		group("Provider", func(fs *pflag.FlagSet) {
			fs.StringVar(&o.Provider, "provider", "", "provider that runs the node's pods (list them with: virtual-kubelet providers); required")
			fs.StringVar(&o.ProviderConfig, "provider-config", "", "provider configuration file")
		}),
		group("Node", func(fs *pflag.FlagSet) {
			fs.StringVar(&o.NodeName, "nodename", strings.ToLower(hostname), "name of the Node to register; with --node-count above 1, the prefix of the nodes' names")
			fs.IntVar(&o.NodeCount, "node-count", 1, "register this many nodes from one process, named NODENAME-0 ... NODENAME-(N-1), each with its own provider, lease and kubelet API on --listen-port + i")
			fs.StringVar(&o.OperatingSystem, "os", "linux", "operating system the node runs pods for (kubernetes.io/os label)")
			fs.StringVar(&o.NodeIP, "node-ip", "", "the Node's InternalIP, where the API server reaches the kubelet API; default: the address of the default route's interface")
			fs.BoolVar(&o.DisableTaint, "disable-taint", false, "register the Node without a taint, so any pod may be scheduled to it")
			fs.StringVar(&o.TaintKey, "taint-key", "virtual-kubelet.io/provider", "key of the Node's taint")
			fs.StringVar(&o.TaintValue, "taint-value", "", "value of the Node's taint; default: the provider's name")
			fs.StringVar(&o.TaintEffect, "taint-effect", string(corev1.TaintEffectNoSchedule), "effect of the Node's taint: NoSchedule, PreferNoSchedule or NoExecute")
			fs.BoolVar(&o.EnableNodeLease, "enable-node-lease", true, "heartbeat with a coordination.k8s.io/v1 Lease in kube-node-lease, as kubelets do")
			fs.DurationVar(&o.StartupTimeout, "startup-timeout", 0, "give up if the node is not up within this time (0: wait forever)")
		}),
		group("Kubernetes API client", func(fs *pflag.FlagSet) {
			fs.StringVar(&o.Kubeconfig, "kubeconfig", "", "kubeconfig file (a list is merged, as kubectl does); without one, the in-cluster config")
			fs.Float32Var(&o.KubeAPIQPS, "kube-api-qps", DefaultKubeAPIQPS, "queries per second to the API server (0: no client-side limit); by default at least 50 per node of --node-count")
			fs.IntVar(&o.KubeAPIBurst, "kube-api-burst", DefaultKubeAPIBurst, "burst of queries to the API server; by default at least 100 per node of --node-count")
			fs.StringVar(&o.KubeAPIContentType, "kube-api-content-type", runtime.ContentTypeProtobuf, "content type of requests to the API server: "+runtime.ContentTypeProtobuf+" (as the kubelet; smaller and cheaper to decode) or "+runtime.ContentTypeJSON)
			fs.IntVar(&o.PodSyncWorkers, "pod-sync-workers", 50, "workers for each of the pod controller's queues (status writes wait on the API server: see BENCHMARKS.md)")
			fs.DurationVar(&o.FullResyncPeriod, "full-resync-period", 0, "informers' resync period (0: none, rely on watch)")
			fs.StringVar(&o.ClusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain")
		}),
		group("Kubelet API server", func(fs *pflag.FlagSet) {
			fs.StringVar(&o.ListenAddress, "listen-address", "0.0.0.0", "address the kubelet API listens on")
			fs.Int32Var(&o.ListenPort, "listen-port", 10250, "port the kubelet API listens on")
			fs.StringVar(&o.TLSCertFile, "tls-cert-file", "", "serving certificate of the kubelet API; without it a self-signed one is made")
			fs.StringVar(&o.TLSKeyFile, "tls-private-key-file", "", "private key of the serving certificate")
			fs.BoolVar(&o.RotateServerCerts, "rotate-server-certificates", false, "request the serving certificate from the certificates API (signer kubernetes.io/kubelet-serving) and renew it before it expires; an operator approves the CSR")
			fs.StringVar(&o.CertDir, "cert-dir", "/var/lib/virtual-kubelet/pki", "where --rotate-server-certificates keeps the certificate and key")
			fs.StringVar(&o.ClientCAFile, "client-ca-file", "", "CA bundle that client certificates (the API server's) are verified against; default: the kubeconfig's CA")
			fs.BoolVar(&o.AnonymousAuth, "anonymous-auth", false, "let unauthenticated requests through as system:anonymous")
			fs.StringVar(&o.AuthorizationMode, "authorization-mode", AuthzWebhook, "Webhook (SubjectAccessReview on nodes/proxy, nodes/stats, ...) or AlwaysAllow")
			fs.DurationVar(&o.StreamIdleTimeout, "streaming-connection-idle-timeout", 4*time.Hour, "close exec, attach and port-forward streams idle this long")
			fs.DurationVar(&o.StreamCreationTimeout, "stream-creation-timeout", 30*time.Second, "how long a client has to open the streams of a session")
			fs.StringVar(&o.MetricsAddr, "metrics-addr", ":10255", "address of the metrics endpoint (/metrics, Prometheus; /healthz); empty disables it")
			fs.BoolVar(&o.EnableProfiling, "enable-profiling", false, "serve Go's /debug/pprof on the metrics address")
		}),
		group("Logging and tracing", func(fs *pflag.FlagSet) {
			fs.StringVar(&o.LogLevel, "log-level", "info", "log level: "+strings.Join(logging.Levels, ", "))
			fs.StringSliceVar(&o.TraceExporters, "trace-exporter", nil, "export spans with these exporters: "+strings.Join(tracing.ExporterNames(), ", "))
			fs.StringVar(&o.TraceSampleRate, "trace-sample-rate", "", `"always", "never" or the fraction of traces to sample, 0 to 1`)
			fs.StringVar(&o.TraceServiceName, "trace-service-name", "virtual-kubelet", "service name of exported spans")
			fs.StringToStringVar(&o.TraceTags, "trace-tag", nil, "tag k=v added to exported spans (repeatable)")
			fs.StringVar(&o.JaegerEndpoint, "jaeger-endpoint", "", "Jaeger collector endpoint, e.g. http://jaeger-collector:14268/api/traces")
			fs.StringVar(&o.JaegerAgentEndpoint, "jaeger-agent-endpoint", "", "Jaeger agent host:port, used when no collector endpoint is set")
		}),
	}
}

// applyEnv sets flags that were not given on the command line from their
// environment variables. A bad value is an error naming the variable.
func applyEnv(fs *pflag.FlagSet) error {
	for _, e := range envFlags {
		v, ok := os.LookupEnv(e.env)
		f := fs.Lookup(e.flag)
		if !ok || v == "" || f == nil || f.Changed {
			continue
		}
		if err := fs.Set(e.flag, v); err != nil {
			return fmt.Errorf("%s=%q (for --%s): %v", e.env, v, e.flag, err)
		}
	}
	return nil
}

// Validate checks the options, returning the first problem found.
func (o *Options) Validate() error {
	if o.Provider == "" {
		return fmt.Errorf("--provider is required (known: %s)", strings.Join(provider.Names(), ", "))
	}
	if _, err := provider.Get(o.Provider); err != nil {
		return err
	}
	if o.NodeCount < 1 {
		return fmt.Errorf("--node-count must be at least 1, got %d", o.NodeCount)
	}
	for _, name := range []string{o.NodeName, o.NodeNames()[o.NodeCount-1]} {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("--nodename %q is not a valid node name: %s", name, strings.Join(errs, "; "))
		}
	}
	if o.NodeIP != "" && net.ParseIP(o.NodeIP) == nil {
		return fmt.Errorf("--node-ip %q is not an IP address", o.NodeIP)
	}
	switch corev1.TaintEffect(o.TaintEffect) {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return fmt.Errorf("--taint-effect %q must be NoSchedule, PreferNoSchedule or NoExecute", o.TaintEffect)
	}
	if !o.DisableTaint {
		if errs := validation.IsQualifiedName(o.TaintKey); len(errs) > 0 {
			return fmt.Errorf("--taint-key %q: %s", o.TaintKey, strings.Join(errs, "; "))
		}
	}
	if o.PodSyncWorkers < 1 {
		return fmt.Errorf("--pod-sync-workers must be at least 1, got %d", o.PodSyncWorkers)
	}
	if o.KubeAPIQPS < 0 || o.KubeAPIBurst < 0 {
		return errors.New("--kube-api-qps and --kube-api-burst must not be negative")
	}
	switch o.KubeAPIContentType {
	case runtime.ContentTypeProtobuf, runtime.ContentTypeJSON:
	default:
		return fmt.Errorf("--kube-api-content-type %q must be %s or %s", o.KubeAPIContentType, runtime.ContentTypeProtobuf, runtime.ContentTypeJSON)
	}
	for name, d := range map[string]time.Duration{
		"startup-timeout": o.StartupTimeout, "full-resync-period": o.FullResyncPeriod,
		"streaming-connection-idle-timeout": o.StreamIdleTimeout, "stream-creation-timeout": o.StreamCreationTimeout,
	} {
		if d < 0 {
			return fmt.Errorf("--%s must not be negative, got %s", name, d)
		}
	}
	if o.ListenPort < 1 || o.ListenPort > 65535 {
		return fmt.Errorf("--listen-port %d is not a port (1-65535)", o.ListenPort)
	}
	if last := int(o.ListenPort) + o.NodeCount - 1; last > 65535 {
		return fmt.Errorf("--listen-port %d with --node-count %d needs ports up to %d, past 65535", o.ListenPort, o.NodeCount, last)
	}
	if net.ParseIP(o.ListenAddress) == nil {
		return fmt.Errorf("--listen-address %q is not an IP address", o.ListenAddress)
	}
	if (o.TLSCertFile == "") != (o.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if o.RotateServerCerts && o.TLSCertFile != "" {
		return errors.New("--rotate-server-certificates and --tls-cert-file are exclusive: the certificate comes from one or the other")
	}
	if o.RotateServerCerts && o.CertDir == "" {
		return errors.New("--rotate-server-certificates needs a --cert-dir")
	}
	if o.AuthorizationMode != AuthzWebhook && o.AuthorizationMode != AuthzAlwaysAllow {
		return fmt.Errorf("--authorization-mode %q must be %s or %s", o.AuthorizationMode, AuthzWebhook, AuthzAlwaysAllow)
	}
	if o.MetricsAddr != "" {
		if _, _, err := net.SplitHostPort(o.MetricsAddr); err != nil {
			return fmt.Errorf("--metrics-addr %q: %v", o.MetricsAddr, err)
		}
	}
	if _, err := logrus.ParseLevel(o.LogLevel); err != nil {
		return fmt.Errorf("--log-level %q must be one of %s", o.LogLevel, strings.Join(logging.Levels, ", "))
	}
	if _, err := tracing.ParseSampler(o.TraceSampleRate); err != nil {
		return err
	}
	for _, e := range o.TraceExporters {
		if _, ok := tracing.Exporters[e]; !ok {
			return fmt.Errorf("--trace-exporter: unknown exporter %q (known: %s)", e, strings.Join(tracing.ExporterNames(), ", "))
		}
	}
	return nil
}

// NodeNames are the names of the nodes to register: --nodename, or with
// --node-count N above 1, NODENAME-0 to NODENAME-(N-1).
func (o *Options) NodeNames() []string {
	if o.NodeCount <= 1 {
		return []string{o.NodeName}
	}
	names := make([]string, o.NodeCount)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", o.NodeName, i)
	}
	return names
}

// workersPerNode shares --pod-sync-workers out among the nodes, at least two
// each: a thousand idle nodes need not hold 150,000 goroutines.
// Per node, the client limits --node-count scales the defaults by: the
// kubelet's own (50 QPS, burst 100), so N nodes of one process may talk as
// much as N kubelets. 1,000 nodes at the single-node default spent 5,000 s
// (summed over requests) waiting in the client's limiter in a bench run.
const (
	kubeAPIQPSPerNode   = 50
	kubeAPIBurstPerNode = 100
)

// scaleClientLimits raises the client limits that were left at their
// defaults to what NodeCount kubelets would have.
func (o *Options) scaleClientLimits(fs *pflag.FlagSet) {
	if f := fs.Lookup("kube-api-qps"); f != nil && !f.Changed {
		o.KubeAPIQPS = max(o.KubeAPIQPS, float32(kubeAPIQPSPerNode*o.NodeCount))
	}
	if f := fs.Lookup("kube-api-burst"); f != nil && !f.Changed {
		o.KubeAPIBurst = max(o.KubeAPIBurst, kubeAPIBurstPerNode*o.NodeCount)
	}
}

func (o *Options) workersPerNode() int {
	return max(2, o.PodSyncWorkers/max(1, o.NodeCount))
}
