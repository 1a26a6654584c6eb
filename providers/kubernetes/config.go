package kubernetes

import (
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/vkubelet/virtual-kubelet/provider"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	psapi "k8s.io/pod-security-admission/api"
)

// Config is the --provider-config file, in YAML or JSON:
//
//	remote:
//	  kubeconfig: /etc/vk/cluster-b.kubeconfig   # or inCluster: true
//	  qps: 500
//	  burst: 1000
//	  upgradeTimeout: 30s        # setup of exec, attach, port-forward
//	namespace: from-a            # every pod in this namespace of B
//	# namespacePrefix: a-        # or: B namespace = prefix + A's namespace
//	capacity:                    # fixed; or deriveCapacity: true
//	  cpu: "64"
//	  memory: 256Gi
//	  pods: "1000"
//	node:
//	  labels: {topology.kubernetes.io/region: b}
//	  taints: [{key: burst, value: "true", effect: NoSchedule}]
//	pods:                        # scheduling in B
//	  nodeSelector: {pool: burst}
//	  tolerations: [{key: virtual-kubelet.io/provider, operator: Exists}]
//	  schedulerName: default-scheduler
//	sourceCluster: a             # A's name, part of every name in B
//	signingKeyFile: /etc/vk/signing-key   # marks what this provider made in B
//	podSecurity: baseline        # restricted, baseline or privileged
//	volumeTypes: [configMap, secret, downwardAPI, projected, emptyDir]
//	annotationPrefixes: [mock.vkubelet.io/]
//	runtimeClasses: {gvisor: gvisor}   # A's runtimeClassName: B's
//	events: {qps: 10, burst: 100}      # B's Events relayed onto A's pods
//	services: {select: used}           # A's Services reflected into B
//	home: {apiServer: https://a.example:6443}  # A's API server from B's pods
//	reflection: {maxObjects: 5000, maxBytes: 256Mi}
type Config struct {
	Remote          RemoteConfig        `json:"remote"`
	Namespace       string              `json:"namespace,omitempty"`
	NamespacePrefix string              `json:"namespacePrefix,omitempty"`
	Capacity        map[string]string   `json:"capacity,omitempty"`
	DeriveCapacity  bool                `json:"deriveCapacity,omitempty"`
	Node            NodeConfig          `json:"node,omitempty"`
	Pods            RemotePodScheduling `json:"pods,omitempty"`

	// SourceCluster names cluster A; with the node's name it begins every
	// name the provider gives objects in B, so two clusters or two nodes
	// writing into one namespace of B cannot meet.
	SourceCluster string `json:"sourceCluster"`
	// SigningKeyFile holds the key (at least 32 bytes) of the signatures
	// that mark the objects this provider made in B: B's users cannot
	// forge them, and the daemon recognises its objects after a restart.
	SigningKeyFile string `json:"signingKeyFile"`
	// PodSecurity is the Pod Security Standards level pods must meet to
	// cross to B, and the level enforced on the namespaces made in B.
	PodSecurity string `json:"podSecurity,omitempty"`
	// VolumeTypes are the volume sources (by field name) that may cross;
	// left out, DefaultVolumeTypes. Not omitempty: an empty list (none may
	// cross) written back must not become the defaults.
	VolumeTypes []string `json:"volumeTypes"`
	// AnnotationPrefixes are the prefixes of the annotations that cross;
	// others are not copied. Not omitempty, as VolumeTypes.
	AnnotationPrefixes []string `json:"annotationPrefixes"`
	// RuntimeClasses maps A's runtimeClassName to B's; a pod naming a
	// class not in the map is refused.
	RuntimeClasses map[string]string `json:"runtimeClasses,omitempty"`
	// Events bounds the Events of B the node relays onto its pods in A.
	Events EventsConfig `json:"events,omitempty"`
	// Services selects A's Services reflected into B (see ServicesConfig).
	Services ServicesConfig `json:"services,omitempty"`
	// Home lets offloaded pods call A's API server as their own service
	// accounts; without it their token volumes do not cross.
	Home HomeConfig `json:"home,omitempty"`
	// Reflection bounds what the node writes into B on A's behalf.
	Reflection ReflectionConfig `json:"reflection,omitempty"`
}

// ServicesConfig selects the Services of A reflected into B. Only Services
// of the namespaces of A where the node has offloaded pods are ever
// candidates, whatever the selection: a pod needs the names of its own
// namespace.
type ServicesConfig struct {
	// Select is "used" (the default: the Services whose selector matches
	// an offloaded pod), "all" (every Service of those namespaces) or
	// "none".
	Select string `json:"select,omitempty"`
	// Namespaces, if set, limits the reflection to these namespaces of A.
	Namespaces []string `json:"namespaces,omitempty"`
	// LabelSelector, if set, limits the reflection to the Services whose
	// labels it matches (kubectl's syntax: app=web,tier!=db).
	LabelSelector string `json:"labelSelector,omitempty"`
}

// The values of ServicesConfig.Select.
const (
	SelectUsed = "used"
	SelectAll  = "all"
	SelectNone = "none"
)

// HomeConfig is A's API server as the pods in B reach it.
type HomeConfig struct {
	// APIServer is https://host:port: offloaded pods get it as
	// KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT, and those whose
	// spec mounts a service-account token get a token of A for it.
	APIServer string `json:"apiServer,omitempty"`
}

// ReflectionConfig bounds the objects the node keeps in B for A's pods
// (copies of ConfigMaps and Secrets, Services and their EndpointSlices,
// token Secrets): at most MaxObjects of them, of at most MaxBytes of
// content together. Past a bound an object is not written, and an Event
// on the pod that needed it says so.
type ReflectionConfig struct {
	MaxObjects int    `json:"maxObjects,omitempty"`
	MaxBytes   string `json:"maxBytes,omitempty"`
}

// Defaults of ReflectionConfig.
const (
	DefaultMaxObjects = 5000
	DefaultMaxBytes   = "256Mi"
)

// EventsConfig bounds the Events of B relayed onto the node's pods in A:
// at most QPS a second in bursts of Burst, whatever B records (beyond,
// they are dropped), on top of the kubelet's per-pod spam filter.
type EventsConfig struct {
	QPS   float32 `json:"qps,omitempty"`
	Burst int     `json:"burst,omitempty"`
}

// Defaults of EventsConfig: a fifth of the kubelet's Event rate (its
// --event-qps 50) with its burst (--event-burst 100), as the Events go
// through the daemon's client of A, whose rate limit the node's pod
// status updates share.
const (
	DefaultEventQPS   = 10
	DefaultEventBurst = 100
)

// Defaults of the pod policy.
var (
	DefaultPodSecurity        = "baseline"
	DefaultVolumeTypes        = []string{"configMap", "secret", "downwardAPI", "projected", "emptyDir"}
	DefaultAnnotationPrefixes = []string{"mock.vkubelet.io/"}
)

// minSigningKey is the shortest signing key accepted: the HMAC-SHA256
// block of security.
const minSigningKey = 32

// RemoteConfig says how to reach cluster B.
type RemoteConfig struct {
	Kubeconfig string  `json:"kubeconfig,omitempty"`
	InCluster  bool    `json:"inCluster,omitempty"`
	QPS        float32 `json:"qps,omitempty"`
	Burst      int     `json:"burst,omitempty"`
	// UpgradeTimeout bounds the setup of an exec, attach or port-forward
	// connection to B's API server: the dial, TLS and its answer to the
	// upgrade (DefaultUpgradeTimeout if not set). An established session
	// is not bounded.
	UpgradeTimeout metav1.Duration `json:"upgradeTimeout,omitempty"`
}

// NodeConfig is what the virtual node in A carries besides the defaults.
type NodeConfig struct {
	Labels map[string]string `json:"labels,omitempty"`
	Taints []corev1.Taint    `json:"taints,omitempty"`
}

// RemotePodScheduling replaces A's scheduling constraints on the pods in B.
type RemotePodScheduling struct {
	NodeSelector  map[string]string   `json:"nodeSelector,omitempty"`
	Tolerations   []corev1.Toleration `json:"tolerations,omitempty"`
	SchedulerName string              `json:"schedulerName,omitempty"`
}

// Defaults of the remote client's rate limit: the daemon's own for A. Each
// pod costs B a create and a delete, so at the kubelet's 50 QPS 1,000 pods
// could not start in under 18 s however fast both clusters are.
const (
	DefaultQPS   = 500
	DefaultBurst = 1000
)

// LoadConfig reads and validates the config file. Errors name the file and
// the field.
func LoadConfig(path string) (*Config, error) {
	var cfg Config
	if err := provider.LoadConfig(path, "the remote cluster (see providers/kubernetes.Config)", &cfg, cfg.validate); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func (c *Config) validate() error {
	r := &c.Remote
	switch {
	case r.Kubeconfig == "" && !r.InCluster:
		return errors.New("remote: set remote.kubeconfig (a path) or remote.inCluster: true")
	case r.Kubeconfig != "" && r.InCluster:
		return errors.New("remote: remote.kubeconfig and remote.inCluster are exclusive")
	case r.QPS < 0:
		return fmt.Errorf("remote.qps: must not be negative, got %v", r.QPS)
	case r.Burst < 0:
		return fmt.Errorf("remote.burst: must not be negative, got %d", r.Burst)
	case r.UpgradeTimeout.Duration < 0:
		return fmt.Errorf("remote.upgradeTimeout: must not be negative, got %s", r.UpgradeTimeout.Duration)
	case c.Events.QPS < 0:
		return fmt.Errorf("events.qps: must not be negative, got %v", c.Events.QPS)
	case c.Events.Burst < 0:
		return fmt.Errorf("events.burst: must not be negative, got %d", c.Events.Burst)
	}
	if r.Kubeconfig != "" {
		if _, err := os.Stat(r.Kubeconfig); err != nil {
			return fmt.Errorf("remote.kubeconfig: %w", err)
		}
	}
	switch {
	case c.Namespace == "" && c.NamespacePrefix == "":
		return errors.New("namespace: set namespace (one namespace in the remote cluster) or namespacePrefix (one per source namespace)")
	case c.Namespace != "" && c.NamespacePrefix != "":
		return errors.New("namespace and namespacePrefix are exclusive")
	case c.Namespace != "":
		if errs := validation.IsDNS1123Label(c.Namespace); len(errs) > 0 {
			return fmt.Errorf("namespace: %q: %s", c.Namespace, strings.Join(errs, "; "))
		}
	default:
		// The longest source namespace must still fit a label.
		if errs := validation.IsDNS1123Label(c.NamespacePrefix + "x"); len(errs) > 0 || len(c.NamespacePrefix) > 20 {
			return fmt.Errorf("namespacePrefix: %q must be at most 20 lower-case letters, digits or '-', starting with a letter or digit", c.NamespacePrefix)
		}
	}
	if err := c.validatePolicy(); err != nil {
		return err
	}
	if c.DeriveCapacity && len(c.Capacity) > 0 {
		return errors.New("capacity and deriveCapacity are exclusive")
	}
	for name, v := range c.Capacity {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("capacity.%s: invalid quantity %q: %v", name, v, err)
		}
		if q.Sign() < 0 {
			return fmt.Errorf("capacity.%s: quantity %q must not be negative", name, v)
		}
	}
	for k, v := range c.Node.Labels {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("node.labels: key %q: %s", k, strings.Join(errs, "; "))
		}
		if errs := validation.IsValidLabelValue(v); len(errs) > 0 {
			return fmt.Errorf("node.labels.%s: value %q: %s", k, v, strings.Join(errs, "; "))
		}
	}
	for i, t := range c.Node.Taints {
		if errs := validation.IsQualifiedName(t.Key); len(errs) > 0 {
			return fmt.Errorf("node.taints[%d].key: %q: %s", i, t.Key, strings.Join(errs, "; "))
		}
		switch t.Effect {
		case corev1.TaintEffectNoSchedule, corev1.TaintEffectPreferNoSchedule, corev1.TaintEffectNoExecute:
		default:
			return fmt.Errorf("node.taints[%d].effect: %q must be NoSchedule, PreferNoSchedule or NoExecute", i, t.Effect)
		}
	}
	for k := range c.Pods.NodeSelector {
		if errs := validation.IsQualifiedName(k); len(errs) > 0 {
			return fmt.Errorf("pods.nodeSelector: key %q: %s", k, strings.Join(errs, "; "))
		}
	}
	for i, t := range c.Pods.Tolerations {
		if t.Operator != "" && t.Operator != corev1.TolerationOpEqual && t.Operator != corev1.TolerationOpExists {
			return fmt.Errorf("pods.tolerations[%d].operator: %q must be Equal or Exists", i, t.Operator)
		}
	}
	return nil
}

// validatePolicy checks the fields of the trust boundary and fills in
// their defaults.
func (c *Config) validatePolicy() error {
	if c.SourceCluster == "" {
		return errors.New("sourceCluster: required: a DNS label naming cluster A, part of every name in the remote cluster")
	}
	if errs := validation.IsDNS1123Label(c.SourceCluster); len(errs) > 0 {
		return fmt.Errorf("sourceCluster: %q: %s (it names cluster A in every name in the remote cluster)", c.SourceCluster, strings.Join(errs, "; "))
	}
	if c.SigningKeyFile == "" {
		return errors.New("signingKeyFile: required: a file of at least 32 random bytes, readable by the daemon only")
	}
	if c.PodSecurity == "" {
		c.PodSecurity = DefaultPodSecurity
	}
	if _, err := psapi.ParseLevel(c.PodSecurity); err != nil {
		return fmt.Errorf("podSecurity: %q: %v", c.PodSecurity, err)
	}
	if c.VolumeTypes == nil {
		c.VolumeTypes = DefaultVolumeTypes
	}
	known := volumeTypeNames()
	for i, v := range c.VolumeTypes {
		if !known[v] {
			return fmt.Errorf("volumeTypes[%d]: %q is no volume source of Kubernetes (as in a pod spec: hostPath, persistentVolumeClaim, ...)", i, v)
		}
	}
	if c.AnnotationPrefixes == nil {
		c.AnnotationPrefixes = DefaultAnnotationPrefixes
	}
	for i, prefix := range c.AnnotationPrefixes {
		if prefix == "" || strings.HasPrefix(prefix, systemPrefix) {
			return fmt.Errorf("annotationPrefixes[%d]: %q: must be non-empty and not under %s, the provider's own", i, prefix, systemPrefix)
		}
	}
	if err := c.validateReflection(); err != nil {
		return err
	}
	for from, to := range c.RuntimeClasses {
		for _, name := range []string{from, to} {
			if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
				return fmt.Errorf("runtimeClasses: %q: %s", name, strings.Join(errs, "; "))
			}
		}
	}
	return nil
}

// signingKey reads the key of SigningKeyFile.
func (c *Config) signingKey() ([]byte, error) {
	key, err := os.ReadFile(c.SigningKeyFile)
	if err != nil {
		return nil, fmt.Errorf("signingKeyFile: %w", err)
	}
	if len(key) < minSigningKey {
		return nil, fmt.Errorf("signingKeyFile %s: %d bytes, want at least %d", c.SigningKeyFile, len(key), minSigningKey)
	}
	return key, nil
}

// capacity returns the fixed capacity; validate has checked the quantities.
func (c *Config) capacity() corev1.ResourceList {
	out := corev1.ResourceList{}
	for name, v := range c.Capacity {
		out[corev1.ResourceName(name)] = resource.MustParse(v)
	}
	return out
}

// eventRate is the node's rate of relayed Events, the defaults filled in.
func (c *Config) eventRate() (qps float32, burst int) {
	qps, burst = DefaultEventQPS, DefaultEventBurst
	if c.Events.QPS > 0 {
		qps = c.Events.QPS
	}
	if c.Events.Burst > 0 {
		burst = c.Events.Burst
	}
	return qps, burst
}

// upgradeTimeout is remote.upgradeTimeout, the default filled in.
func (c *Config) upgradeTimeout() time.Duration {
	if c.Remote.UpgradeTimeout.Duration > 0 {
		return c.Remote.UpgradeTimeout.Duration
	}
	return DefaultUpgradeTimeout
}

// restConfig is the client configuration for cluster B.
func (c *Config) restConfig() (*rest.Config, error) {
	var cfg *rest.Config
	var err error
	if c.Remote.InCluster {
		cfg, err = rest.InClusterConfig()
		if errors.Is(err, rest.ErrNotInCluster) {
			return nil, errors.New("remote.inCluster: the daemon does not run in a pod of the remote cluster (KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set); set remote.kubeconfig instead")
		}
		if err != nil {
			return nil, fmt.Errorf("remote.inCluster: %v", err)
		}
	} else {
		cfg, err = clientcmd.BuildConfigFromFlags("", c.Remote.Kubeconfig)
		if err != nil {
			return nil, fmt.Errorf("remote.kubeconfig %s: %v", c.Remote.Kubeconfig, err)
		}
	}
	cfg.QPS, cfg.Burst = DefaultQPS, DefaultBurst
	if c.Remote.QPS > 0 {
		cfg.QPS = c.Remote.QPS
	}
	if c.Remote.Burst > 0 {
		cfg.Burst = c.Remote.Burst
	}
	return cfg, nil
}
