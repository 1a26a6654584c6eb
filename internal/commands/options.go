package commands

import (
	"errors"
	"fmt"
	"net"
	"strconv"
	"strings"
	"time"

	"github.com/sirupsen/logrus"
	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/tools/leaderelection"

	"github.com/vkubelet/virtual-kubelet/internal/ha"
	"github.com/vkubelet/virtual-kubelet/internal/logging"
	"github.com/vkubelet/virtual-kubelet/internal/tracing"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// Options are the daemon's settings, from flags and environment, in the
// groups --help shows them in; each part of the daemon takes the group it
// needs.
type Options struct {
	Provider      ProviderOptions
	Node          NodeOptions
	Client        ClientOptions
	Server        ServerOptions
	LeaderElect   LeaderElectionOptions
	Observability ObservabilityOptions
}

// ProviderOptions choose and configure the provider.
type ProviderOptions struct {
	Name   string
	Config string
	// StageConfigs are kwok Stage files, for the mock.
	StageConfigs []string
	// WatchStages runs the mock by the kwok objects in the cluster too.
	WatchStages bool
}

// NodeOptions describe the Nodes to register.
type NodeOptions struct {
	NodeName        string
	NodeCount       int
	OperatingSystem string
	NodeIP          string
	DisableTaint    bool
	TaintKey        string
	TaintValue      string
	TaintEffect     string
	EnableNodeLease bool
	// StatusReportFrequency is how often an unchanged node status is
	// written while the lease carries the heartbeat.
	StatusReportFrequency time.Duration
	StartupTimeout        time.Duration
	SharedPodWatch        bool
	// Managed chooses Nodes created by others to manage instead.
	Managed ManagedNodeOptions
}

// ClientOptions configure the client of the API server and the controllers
// that use it.
type ClientOptions struct {
	Kubeconfig   string
	KubeAPIQPS   float32
	KubeAPIBurst int
	// KubeAPIMaxInFlight bounds the requests in flight to the API server,
	// watches aside; 0 is no bound.
	KubeAPIMaxInFlight int
	KubeAPIContentType string
	PodSyncWorkers     int
	FullResyncPeriod   time.Duration
	ClusterDomain      string
	// qpsScales and burstScales: with managed nodes, the limits were
	// left at their defaults and scale with the nodes served
	// (managedLimiter).
	qpsScales, burstScales bool
}

// ServerOptions configure the kubelet API and metrics servers.
type ServerOptions struct {
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

	// KubeletListener is the shape of the kubelet APIs' listeners:
	// ListenerPerNode or ListenerShared.
	KubeletListener string
}

// LeaderElectionOptions let replicas of the daemon share its nodes: each
// node is served by the replica holding the node's holder Lease.
type LeaderElectionOptions struct {
	LeaderElect       bool
	LeaseDuration     time.Duration
	RenewDeadline     time.Duration
	RetryPeriod       time.Duration
	ResourceNamespace string
}

// ObservabilityOptions configure logs and spans.
type ObservabilityOptions struct {
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

// DefaultMetricsAddr is where metrics are served unless --metrics-addr says
// otherwise: loopback, since the endpoint has no authentication (the
// kubelet's read-only port 10255, which it stands for, is off by default
// for the same reason).
const DefaultMetricsAddr = "127.0.0.1:10255"

// Validate checks the options, group by group, returning the first
// problem found.
func (o *Options) Validate() error {
	for _, check := range []func() error{o.Provider.validate, o.Node.validate, o.Client.validate, o.Server.validate, o.LeaderElect.validate, o.Observability.validate} {
		if err := check(); err != nil {
			return err
		}
	}
	ports := o.kubeletPorts()
	if last := int(o.Server.ListenPort) + ports - 1; last > 65535 {
		return fmt.Errorf("--listen-port %d with --node-count %d needs ports up to %d, past 65535", o.Server.ListenPort, o.Node.NodeCount, last)
	}
	if o.Server.MetricsAddr != "" {
		host, p, _ := net.SplitHostPort(o.Server.MetricsAddr) // checked by ServerOptions.validate
		port, err := strconv.Atoi(p)
		switch {
		case err != nil || !sameInterface(host, o.Server.ListenAddress) || port < int(o.Server.ListenPort) || port >= int(o.Server.ListenPort)+ports:
		case o.sharedListener():
			return fmt.Errorf("--metrics-addr %q is on the kubelet API port of every node (--listen-port %d, --kubelet-listener %s): move one or the other",
				o.Server.MetricsAddr, o.Server.ListenPort, ListenerShared)
		default:
			return fmt.Errorf("--metrics-addr %q is on the kubelet API port of node %s (--listen-port %d + %d): move one or the other",
				o.Server.MetricsAddr, o.Node.NodeNames()[port-int(o.Server.ListenPort)], o.Server.ListenPort, port-int(o.Server.ListenPort))
		}
	}
	if o.LeaderElect.LeaderElect {
		last := o.Node.NodeNames()[o.Node.NodeCount-1]
		if errs := validation.IsDNS1123Subdomain(ha.HolderLeaseName(last)); len(errs) > 0 {
			return fmt.Errorf("--leader-elect: node %q makes holder lease name %q: %s", last, ha.HolderLeaseName(last), strings.Join(errs, "; "))
		}
	}
	return nil
}

func (p *ProviderOptions) validate() error {
	if p.Name == "" {
		return fmt.Errorf("--provider is required (known: %s)", strings.Join(provider.Names(), ", "))
	}
	if _, err := provider.Get(p.Name); err != nil {
		return err
	}
	if len(p.StageConfigs) > 0 && p.Name != "mock" {
		return fmt.Errorf("--stage-config: kwok's Stages run in the mock provider only, not in --provider %s", p.Name)
	}
	if p.WatchStages && p.Name != "mock" {
		return fmt.Errorf("--watch-stages: kwok's Stages run in the mock provider only, not in --provider %s", p.Name)
	}
	return nil
}

func (n *NodeOptions) validate() error {
	if n.NodeCount < 1 {
		return fmt.Errorf("--node-count must be at least 1, got %d", n.NodeCount)
	}
	for _, name := range []string{n.NodeName, n.NodeNames()[n.NodeCount-1]} {
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return fmt.Errorf("--nodename %q is not a valid node name: %s", name, strings.Join(errs, "; "))
		}
	}
	if n.NodeIP != "" && net.ParseIP(n.NodeIP) == nil {
		return fmt.Errorf("--node-ip %q is not an IP address", n.NodeIP)
	}
	switch corev1.TaintEffect(n.TaintEffect) {
	case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
	default:
		return fmt.Errorf("--taint-effect %q must be NoSchedule, PreferNoSchedule or NoExecute", n.TaintEffect)
	}
	if !n.DisableTaint {
		if errs := validation.IsQualifiedName(n.TaintKey); len(errs) > 0 {
			return fmt.Errorf("--taint-key %q: %s", n.TaintKey, strings.Join(errs, "; "))
		}
	}
	if n.StatusReportFrequency <= 0 {
		return fmt.Errorf("--node-status-report-frequency must be positive, got %s", n.StatusReportFrequency)
	}
	if err := n.Managed.validate(n); err != nil {
		return err
	}
	return notNegative("startup-timeout", n.StartupTimeout)
}

func (c *ClientOptions) validate() error {
	if c.PodSyncWorkers < 1 {
		return fmt.Errorf("--pod-sync-workers must be at least 1, got %d", c.PodSyncWorkers)
	}
	if c.KubeAPIMaxInFlight < 0 {
		return fmt.Errorf("--kube-api-max-in-flight must not be negative, got %d", c.KubeAPIMaxInFlight)
	}
	if c.KubeAPIQPS < 0 || c.KubeAPIBurst < 0 {
		return errors.New("--kube-api-qps and --kube-api-burst must not be negative")
	}
	switch c.KubeAPIContentType {
	case runtime.ContentTypeProtobuf, runtime.ContentTypeJSON:
	default:
		return fmt.Errorf("--kube-api-content-type %q must be %s or %s", c.KubeAPIContentType, runtime.ContentTypeProtobuf, runtime.ContentTypeJSON)
	}
	return notNegative("full-resync-period", c.FullResyncPeriod)
}

func (s *ServerOptions) validate() error {
	if s.ListenPort < 1 || s.ListenPort > 65535 {
		return fmt.Errorf("--listen-port %d is not a port (1-65535)", s.ListenPort)
	}
	if net.ParseIP(s.ListenAddress) == nil {
		return fmt.Errorf("--listen-address %q is not an IP address", s.ListenAddress)
	}
	if (s.TLSCertFile == "") != (s.TLSKeyFile == "") {
		return errors.New("--tls-cert-file and --tls-private-key-file go together")
	}
	if s.RotateServerCerts && s.TLSCertFile != "" {
		return errors.New("--rotate-server-certificates and --tls-cert-file are exclusive: the certificate comes from one or the other")
	}
	if s.RotateServerCerts && s.CertDir == "" {
		return errors.New("--rotate-server-certificates needs a --cert-dir")
	}
	if s.KubeletListener != ListenerPerNode && s.KubeletListener != ListenerShared {
		return fmt.Errorf("--kubelet-listener %q must be %s or %s", s.KubeletListener, ListenerPerNode, ListenerShared)
	}
	if s.AuthorizationMode != AuthzWebhook && s.AuthorizationMode != AuthzAlwaysAllow {
		return fmt.Errorf("--authorization-mode %q must be %s or %s", s.AuthorizationMode, AuthzWebhook, AuthzAlwaysAllow)
	}
	if s.MetricsAddr != "" {
		host, _, err := net.SplitHostPort(s.MetricsAddr)
		if err != nil {
			return fmt.Errorf("--metrics-addr %q: %v", s.MetricsAddr, err)
		}
		if s.EnableProfiling && !isLoopback(host) {
			return fmt.Errorf("--enable-profiling serves /debug/pprof without authentication: --metrics-addr %q must be a loopback address (127.0.0.1, [::1] or localhost)", s.MetricsAddr)
		}
	}
	if err := notNegative("streaming-connection-idle-timeout", s.StreamIdleTimeout); err != nil {
		return err
	}
	return notNegative("stream-creation-timeout", s.StreamCreationTimeout)
}

// nodeLeaseSlack is how long a dead replica's nodes may stay unserved
// before the control plane marks them NotReady: the node lease's duration
// less its renew interval (a heartbeat may be that old when the replica
// dies).
var nodeLeaseSlack = time.Duration(float64(node.DefaultLeaseDuration*time.Second) * (1 - node.DefaultRenewIntervalFraction))

// validate checks that the durations can work: a replica that lost its
// holder lease stops serving before another replica may take the node over
// (client-go gives up renewing at most renew deadline + retry period after
// the last renewal), and a dead replica's nodes move before their node
// leases expire. The flags are ignored without --leader-elect.
func (l *LeaderElectionOptions) validate() error {
	if !l.LeaderElect {
		return nil
	}
	for _, d := range []struct {
		flag string
		v    time.Duration
	}{{"lease-duration", l.LeaseDuration}, {"renew-deadline", l.RenewDeadline}, {"retry-period", l.RetryPeriod}} {
		if d.v <= 0 {
			return fmt.Errorf("--leader-elect-%s must be positive, got %s", d.flag, d.v)
		}
	}
	if l.RenewDeadline+l.RetryPeriod > l.LeaseDuration {
		return fmt.Errorf("--leader-elect-renew-deadline %s plus --leader-elect-retry-period %s must not exceed --leader-elect-lease-duration %s: a replica that cannot renew must stop serving before another may take its nodes",
			l.RenewDeadline, l.RetryPeriod, l.LeaseDuration)
	}
	if float64(l.RetryPeriod)*leaderelection.JitterFactor >= float64(l.RenewDeadline) {
		return fmt.Errorf("--leader-elect-retry-period %s must be under %s, 1/%.1f of --leader-elect-renew-deadline %s, to leave room for a retry",
			l.RetryPeriod, time.Duration(float64(l.RenewDeadline)/leaderelection.JitterFactor), leaderelection.JitterFactor, l.RenewDeadline)
	}
	if l.LeaseDuration+l.RetryPeriod >= nodeLeaseSlack {
		return fmt.Errorf("--leader-elect-lease-duration %s plus --leader-elect-retry-period %s must be under %s: a dead replica's nodes would move after their node leases (%ds, renewed every %s) expire",
			l.LeaseDuration, l.RetryPeriod, nodeLeaseSlack, node.DefaultLeaseDuration, time.Duration(float64(node.DefaultLeaseDuration*time.Second)*node.DefaultRenewIntervalFraction))
	}
	if l.ResourceNamespace != "" {
		if errs := validation.IsDNS1123Label(l.ResourceNamespace); len(errs) > 0 {
			return fmt.Errorf("--leader-elect-resource-namespace %q: %s", l.ResourceNamespace, strings.Join(errs, "; "))
		}
	}
	return nil
}

func (l *ObservabilityOptions) validate() error {
	if _, err := logrus.ParseLevel(l.LogLevel); err != nil {
		return fmt.Errorf("--log-level %q must be one of %s", l.LogLevel, strings.Join(logging.Levels, ", "))
	}
	if _, err := tracing.ParseSampler(l.TraceSampleRate); err != nil {
		return err
	}
	for _, e := range l.TraceExporters {
		if _, ok := tracing.Exporters[e]; !ok {
			return fmt.Errorf("--trace-exporter: unknown exporter %q (known: %s)", e, strings.Join(tracing.ExporterNames(), ", "))
		}
	}
	return nil
}

func notNegative(flag string, d time.Duration) error {
	if d < 0 {
		return fmt.Errorf("--%s must not be negative, got %s", flag, d)
	}
	return nil
}

// NodeNames are the names of the nodes to register: --nodename, or with
// --node-count N above 1, NODENAME-0 to NODENAME-(N-1).
func (n *NodeOptions) NodeNames() []string {
	if n.NodeCount <= 1 {
		return []string{n.NodeName}
	}
	names := make([]string, n.NodeCount)
	for i := range names {
		names[i] = fmt.Sprintf("%s-%d", n.NodeName, i)
	}
	return names
}

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
// With managed nodes, whose number is known only as they come, those
// defaults scale as they come and go (managedLimiter).
func (o *Options) scaleClientLimits(fs *pflag.FlagSet) {
	managed := o.Node.Managed.Enabled()
	if f := fs.Lookup("kube-api-qps"); f != nil && !f.Changed {
		o.Client.KubeAPIQPS = max(o.Client.KubeAPIQPS, float32(kubeAPIQPSPerNode*o.Node.NodeCount))
		o.Client.qpsScales = managed
	}
	if f := fs.Lookup("kube-api-burst"); f != nil && !f.Changed {
		o.Client.KubeAPIBurst = max(o.Client.KubeAPIBurst, kubeAPIBurstPerNode*o.Node.NodeCount)
		o.Client.burstScales = managed
	}
}

// workersPerNode shares --pod-sync-workers out among the nodes, at least two
// each: a thousand idle nodes need not hold 150,000 goroutines.
func (o *Options) workersPerNode() int {
	if o.Node.Managed.Enabled() {
		return managedNodeWorkers
	}
	return max(2, o.Client.PodSyncWorkers/max(1, o.Node.NodeCount))
}

// sameInterface reports whether listeners on hosts a and b may collide: one
// of them is every interface, or they are the same address.
func sameInterface(a, b string) bool {
	every := func(h string) bool {
		ip := net.ParseIP(h)
		return h == "" || ip != nil && ip.IsUnspecified()
	}
	return every(a) || every(b) || a == b
}

// isLoopback reports whether host, of a listen address, is reachable from
// this machine only; "" (every interface) is not.
func isLoopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}
