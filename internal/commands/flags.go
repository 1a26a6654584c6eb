package commands

import (
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/vkubelet/virtual-kubelet/internal/logging"
	"github.com/vkubelet/virtual-kubelet/internal/tracing"
)

// statusReportFrequency is the kubelet's nodeStatusReportFrequency. The
// library's default (node.DefaultStatusUpdateInterval) is the prior
// project's minute; the daemon writes the status as seldom as the kubelet,
// which the node controller allows by putting an overwritten condition back
// at once.
const statusReportFrequency = 5 * time.Minute

// FlagGroupAnnotation is the annotation, on each of the root command's
// flags, that names the group --help shows it in, so that docs/flags.md
// (hack/gendocs) groups them the same way.
const FlagGroupAnnotation = "virtual-kubelet.io/flag-group"

// DocDefaultAnnotation is the annotation, on a flag whose default depends on
// the machine (the host name), that says in words what the default is: a
// generated page must not depend on where it was generated.
const DocDefaultAnnotation = "virtual-kubelet.io/doc-default"

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
			_ = fs.SetAnnotation(f.Name, FlagGroupAnnotation, []string{title})
		})
		return flagGroup{title, fs}
	}
	return []flagGroup{
		group("Provider", o.Provider.addFlags),
		group("Node", o.Node.addFlags),
		group("Kubernetes API client", o.Client.addFlags),
		group("Kubelet API server", o.Server.addFlags),
		group("High availability", o.LeaderElect.addFlags),
		group("Logging and tracing", o.Observability.addFlags),
	}
}

func (p *ProviderOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&p.Name, "provider", "", "provider that runs the node's pods (list them with: virtual-kubelet providers); required")
	fs.StringVar(&p.Config, "provider-config", "", "provider configuration file")
	fs.StringArrayVar(&p.StageConfigs, "stage-config", nil, "with --provider mock, a file of kwok Stages (kwok.x-k8s.io/v1alpha1; several documents or a list) that run the node's unannotated pods and the node's status, and ResourceUsage/ClusterResourceUsage objects that give those pods' CPU and memory (repeatable; see docs/providers/mock.md)")
	fs.BoolVar(&p.WatchStages, "watch-stages", false, "with --provider mock, also run by the kwok Stage, ResourceUsage and ClusterResourceUsage objects in the cluster (kwok.x-k8s.io/v1alpha1; its CRDs must be installed), as they are created, changed and deleted; the --stage-config files win over a cluster object of the same name")
}

func (n *NodeOptions) addFlags(fs *pflag.FlagSet) {
	hostname, _ := os.Hostname()
	fs.StringVar(&n.NodeName, "nodename", strings.ToLower(hostname), "name of the Node to register; with --node-count above 1, the prefix of the nodes' names")
	_ = fs.SetAnnotation("nodename", DocDefaultAnnotation, []string{"the host name, in lower case"})
	fs.IntVar(&n.NodeCount, "node-count", 1, "register this many nodes from one process, named NODENAME-0 ... NODENAME-(N-1), each with its own provider, lease and kubelet API (on --listen-port + i, or all on --listen-port with --kubelet-listener shared)")
	fs.StringVar(&n.OperatingSystem, "os", "linux", "operating system the node runs pods for (kubernetes.io/os label)")
	fs.StringVar(&n.NodeIP, "node-ip", "", "the Node's InternalIP, where the API server reaches the kubelet API; default: the address of the default route's interface")
	fs.BoolVar(&n.DisableTaint, "disable-taint", false, "register the Node without a taint, so any pod may be scheduled to it")
	fs.StringVar(&n.TaintKey, "taint-key", "virtual-kubelet.io/provider", "key of the Node's taint")
	fs.StringVar(&n.TaintValue, "taint-value", "", "value of the Node's taint; default: the provider's name")
	fs.StringVar(&n.TaintEffect, "taint-effect", string(corev1.TaintEffectNoSchedule), "effect of the Node's taint: NoSchedule, PreferNoSchedule or NoExecute")
	fs.BoolVar(&n.EnableNodeLease, "enable-node-lease", true, "heartbeat with a coordination.k8s.io/v1 Lease in kube-node-lease, as kubelets do")
	fs.DurationVar(&n.StatusReportFrequency, "node-status-report-frequency", statusReportFrequency, "with --enable-node-lease, how often the node status is written when nothing in it changed, as the kubelet's nodeStatusReportFrequency; a change, or a condition someone else overwrote (Ready Unknown after an outage), is written at once")
	fs.DurationVar(&n.StartupTimeout, "startup-timeout", 0, "give up if the node is not up within this time (0: wait forever); with --leader-elect, each node from its takeover: a node not up in time is handed over")
	fs.BoolVar(&n.SharedPodWatch, "shared-pod-watch", false, "watch all bound pods once for the process (spec.nodeName!=) instead of each node its own (spec.nodeName=NODE), as with --node-count above 1 or --leader-elect: needs list and watch of all pods, which a node's own credentials do not give, but the API server then buffers up to 1,000 events for the watch instead of 10 and does not cut it off under a burst of thousands of pods (see BENCHMARKS.md)")
	n.Managed.addFlags(fs)
}

func (c *ClientOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&c.Kubeconfig, "kubeconfig", "", "kubeconfig file (a list is merged, as kubectl does); without one, the in-cluster config")
	fs.Float32Var(&c.KubeAPIQPS, "kube-api-qps", DefaultKubeAPIQPS, "queries per second to the API server (0: no client-side limit); by default at least 50 per node of --node-count or managed node")
	fs.IntVar(&c.KubeAPIBurst, "kube-api-burst", DefaultKubeAPIBurst, "burst of queries to the API server; by default at least 100 per node of --node-count or managed node")
	fs.IntVar(&c.KubeAPIMaxInFlight, "kube-api-max-in-flight", 1000, "requests in flight to the API server at once, watches aside, and as many lease renewals besides (0: no bound); more wait in the daemon (see BENCHMARKS.md)")
	fs.StringVar(&c.KubeAPIContentType, "kube-api-content-type", runtime.ContentTypeProtobuf, "content type of requests to the API server: "+runtime.ContentTypeProtobuf+" (as the kubelet; smaller and cheaper to decode) or "+runtime.ContentTypeJSON)
	fs.IntVar(&c.PodSyncWorkers, "pod-sync-workers", 50, "workers for each of the pod controller's queues (status writes wait on the API server: see BENCHMARKS.md)")
	fs.DurationVar(&c.FullResyncPeriod, "full-resync-period", 0, "informers' resync period (0: none, rely on watch)")
	fs.StringVar(&c.ClusterDomain, "cluster-domain", "cluster.local", "the cluster's DNS domain")
}

func (s *ServerOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&s.ListenAddress, "listen-address", "0.0.0.0", "address the kubelet API listens on")
	fs.Int32Var(&s.ListenPort, "listen-port", 10250, "port the kubelet API listens on; with --node-count N and --kubelet-listener per-node, the first of N")
	fs.StringVar(&s.KubeletListener, "kubelet-listener", ListenerPerNode, "with --node-count above 1 or --manage-*: "+ListenerPerNode+" (each node its own listener on --listen-port + i, as many kubelets) or "+
		ListenerShared+" (one listener on --listen-port for every node, which finds a request's node from its pod, or its /nodes/NODE/ path; less memory; see docs/many-nodes.md)")
	fs.StringVar(&s.TLSCertFile, "tls-cert-file", "", "serving certificate of the kubelet API; without it a self-signed one is made")
	fs.StringVar(&s.TLSKeyFile, "tls-private-key-file", "", "private key of the serving certificate")
	fs.BoolVar(&s.RotateServerCerts, "rotate-server-certificates", false, "request the serving certificate from the certificates API (signer kubernetes.io/kubelet-serving) and renew it before it expires; an operator approves the CSR")
	fs.StringVar(&s.CertDir, "cert-dir", "/var/lib/virtual-kubelet/pki", "where --rotate-server-certificates keeps the certificate and key")
	fs.StringVar(&s.ClientCAFile, "client-ca-file", "", "CA bundle that client certificates (the API server's) are verified against; default: the kubeconfig's CA")
	fs.BoolVar(&s.AnonymousAuth, "anonymous-auth", false, "let unauthenticated requests through as system:anonymous")
	fs.StringVar(&s.AuthorizationMode, "authorization-mode", AuthzWebhook, "Webhook (SubjectAccessReview on nodes/proxy, nodes/stats, ...) or AlwaysAllow")
	fs.DurationVar(&s.StreamIdleTimeout, "streaming-connection-idle-timeout", 4*time.Hour, "close exec, attach and port-forward streams idle this long")
	fs.DurationVar(&s.StreamCreationTimeout, "stream-creation-timeout", 30*time.Second, "how long a client has to open the streams of a session")
	fs.StringVar(&s.MetricsAddr, "metrics-addr", DefaultMetricsAddr, "address of the metrics endpoint (/metrics, Prometheus; /healthz), plaintext and unauthenticated; empty disables it")
	fs.BoolVar(&s.EnableProfiling, "enable-profiling", false, "serve Go's /debug/pprof on the metrics address, which must then be a loopback one")
}

func (l *LeaderElectionOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&l.LeaderElect, "leader-elect", false, "share the nodes with the other replicas started with the same --nodename and --node-count: each node is served by the replica holding its holder Lease")
	fs.DurationVar(&l.LeaseDuration, "leader-elect-lease-duration", 15*time.Second, "how long a node's holder lease lasts unrenewed before another replica may take the node")
	fs.DurationVar(&l.RenewDeadline, "leader-elect-renew-deadline", 10*time.Second, "how long a holder keeps trying to renew before it stops serving the node")
	fs.DurationVar(&l.RetryPeriod, "leader-elect-retry-period", 2*time.Second, "how often holders renew and candidates try to acquire")
	fs.StringVar(&l.ResourceNamespace, "leader-elect-resource-namespace", "", "namespace of the holder and replica Leases; default: the daemon's own namespace in a cluster (its service account's), else default")
}

func (l *ObservabilityOptions) addFlags(fs *pflag.FlagSet) {
	fs.StringVar(&l.LogLevel, "log-level", "info", "log level: "+strings.Join(logging.Levels, ", "))
	fs.StringSliceVar(&l.TraceExporters, "trace-exporter", nil, "export spans with these exporters: "+strings.Join(tracing.ExporterNames(), ", "))
	fs.StringVar(&l.TraceSampleRate, "trace-sample-rate", "", `"always", "never" or the fraction of traces to sample, 0 to 1`)
	fs.StringVar(&l.TraceServiceName, "trace-service-name", "virtual-kubelet", "service name of exported spans")
	fs.StringToStringVar(&l.TraceTags, "trace-tag", nil, "tag k=v added to exported spans (repeatable)")
	fs.StringVar(&l.JaegerEndpoint, "jaeger-endpoint", "", "Jaeger collector endpoint, e.g. http://jaeger-collector:14268/api/traces")
	fs.StringVar(&l.JaegerAgentEndpoint, "jaeger-agent-endpoint", "", "Jaeger agent host:port, used when no collector endpoint is set")
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
