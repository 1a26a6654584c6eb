package kubernetes

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/provider"
)

func writeConfig(t *testing.T, text string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "config.yaml")
	if err := os.WriteFile(path, []byte(text), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestLoadConfig(t *testing.T) {
	kubeconfig := writeConfig(t, "apiVersion: v1\nkind: Config\n")
	good := `remote: {kubeconfig: ` + kubeconfig + `, qps: 20, burst: 40}
sourceCluster: a
signingKeyFile: /etc/vk/key
runtimeClasses: {gvisor: runsc}
events: {qps: 2}
namespace: from-a
capacity: {cpu: "8", pods: "100"}
node:
  labels: {region: b}
  taints: [{key: burst, value: "yes", effect: NoSchedule}]
pods:
  nodeSelector: {pool: burst}
  tolerations: [{key: burst, operator: Exists}]
`
	cfg, err := LoadConfig(writeConfig(t, good))
	if err != nil {
		t.Fatal(err)
	}
	pods := cfg.capacity()[corev1.ResourcePods]
	if cfg.Namespace != "from-a" || cfg.Remote.QPS != 20 || pods.Value() != 100 ||
		cfg.Node.Taints[0].Effect != corev1.TaintEffectNoSchedule || cfg.Pods.NodeSelector["pool"] != "burst" ||
		cfg.PodSecurity != "baseline" || !slices.Equal(cfg.VolumeTypes, DefaultVolumeTypes) || !slices.Equal(cfg.AnnotationPrefixes, DefaultAnnotationPrefixes) ||
		cfg.RuntimeClasses["gvisor"] != "runsc" {
		t.Errorf("config: %+v", cfg)
	}
	if qps, burst := cfg.eventRate(); qps != 2 || burst != DefaultEventBurst {
		t.Errorf("events: {qps: 2} gives a rate of %v/s, burst %d; want 2/s, the default burst %d", qps, burst, DefaultEventBurst)
	}
	// The same in JSON.
	if _, err := LoadConfig(writeConfig(t, `{"remote": {"inCluster": true}, "namespacePrefix": "a-", "deriveCapacity": true, "sourceCluster": "a", "signingKeyFile": "/k"}`)); err != nil {
		t.Errorf("JSON config: %v", err)
	}

	const trust = "\nsourceCluster: a\nsigningKeyFile: /k"
	for _, tt := range []struct{ config, want string }{
		{``, "remote: set remote.kubeconfig"},
		{`remote: {inCluster: true}` + "\nnamespace: a", "sourceCluster: required"},
		{`remote: {inCluster: true}` + "\nnamespace: a\nsourceCluster: A.B", `sourceCluster: "A.B"`},
		{`remote: {inCluster: true}` + "\nnamespace: a\nsourceCluster: a", "signingKeyFile: required"},
		{`remote: {inCluster: true}` + "\nnamespace: a\npodSecurity: strict" + trust, `podSecurity: "strict": must be one of privileged, baseline, restricted`},
		{`remote: {inCluster: true}` + "\nnamespace: a\nvolumeTypes: [secret, hostpath]" + trust, `volumeTypes[1]: "hostpath" is no volume source`},
		{`remote: {inCluster: true}` + "\nnamespace: a\nannotationPrefixes: [virtual-kubelet.io/]" + trust, `annotationPrefixes[0]: "virtual-kubelet.io/"`},
		{`remote: {inCluster: true}` + "\nnamespace: a\nruntimeClasses: {gvisor: Bad_Name}" + trust, `runtimeClasses: "Bad_Name"`},
		{`remote: {inCluster: true}`, "namespace: set namespace"},
		{`remote: {inCluster: true, kubeconfig: /x}` + "\nnamespace: a", "exclusive"},
		{`remote: {kubeconfig: /does/not/exist}` + "\nnamespace: a", "remote.kubeconfig: stat /does/not/exist"},
		{`remote: {inCluster: true, qps: -1}` + "\nnamespace: a", "remote.qps: must not be negative"},
		{`remote: {inCluster: true}` + "\nnamespace: a\nevents: {qps: -1}", "events.qps: must not be negative"},
		{`remote: {inCluster: true}` + "\nnamespace: a\nevents: {burst: -5}", "events.burst: must not be negative"},
		{`remote: {inCluster: true}` + "\nnamespace: Not_A_Label", `namespace: "Not_A_Label"`},
		{`remote: {inCluster: true}` + "\nnamespace: a\nnamespacePrefix: b-", "namespace and namespacePrefix are exclusive"},
		{`remote: {inCluster: true}` + "\nnamespacePrefix: UPPER-", "namespacePrefix"},
		{`remote: {inCluster: true}` + "\nnamespace: a\ncapacity: {cpu: lots}" + trust, `capacity.cpu: invalid quantity "lots"`},
		{`remote: {inCluster: true}` + "\nnamespace: a\ncapacity: {cpu: \"1\"}\nderiveCapacity: true" + trust, "capacity and deriveCapacity are exclusive"},
		{`remote: {inCluster: true}` + "\nnamespace: a\nnode: {taints: [{key: k, effect: Sometimes}]}" + trust, `node.taints[0].effect: "Sometimes"`},
		{`remote: {inCluster: true}` + "\nnamespace: a\nnode: {labels: {\"bad key!\": v}}" + trust, `node.labels: key "bad key!"`},
		{`remote: {inCluster: true}` + "\nnamespace: a\npods: {tolerations: [{key: k, operator: Maybe}]}" + trust, `pods.tolerations[0].operator: "Maybe"`},
		{`remote: {inCluster: true}` + "\nnamespace: a\nnamspace: typo", `unknown field "namspace"`},
		{`remote: [1, 2]`, "remote"},
	} {
		_, err := LoadConfig(writeConfig(t, tt.config))
		if err == nil || !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), "provider config ") {
			t.Errorf("config %q: error %v, want one containing %q", tt.config, err, tt.want)
		}
	}
	if _, err := LoadConfig(""); err == nil || !strings.Contains(err.Error(), "--provider-config is required") {
		t.Errorf("no config: %v", err)
	}
}

// TestInClusterOutsideACluster: inCluster where the daemon is no pod is a
// clear error, before any connection is tried.
func TestInClusterOutsideACluster(t *testing.T) {
	t.Setenv("KUBERNETES_SERVICE_HOST", "")
	t.Setenv("KUBERNETES_SERVICE_PORT", "")
	key := writeConfig(t, strings.Repeat("k", minSigningKey))
	_, err := New(context.Background(), provider.InitConfig{NodeName: "vk", ConfigPath: writeConfig(t, "remote: {inCluster: true}\nnamespace: from-a\nsourceCluster: a\nsigningKeyFile: "+key+"\n")})
	if err == nil || !strings.Contains(err.Error(), "remote.inCluster: the daemon does not run in a pod of the remote cluster") {
		t.Errorf("inCluster outside a cluster: %v", err)
	}
}

// TestNewRefusesWeakTrust: a short signing key, or a node name that cannot
// be part of names in B, is refused at start with the field named.
func TestNewRefusesWeakTrust(t *testing.T) {
	short := writeConfig(t, "short")
	key := writeConfig(t, strings.Repeat("k", minSigningKey))
	for _, tt := range []struct{ node, key, want string }{
		{"vk", short, "signingKeyFile " + short + ": 5 bytes, want at least 32"},
		{"vk", "/does/not/exist", "signingKeyFile: open /does/not/exist"},
		{"vk.b", key, `node name "vk.b"`},
	} {
		_, err := New(context.Background(), provider.InitConfig{NodeName: tt.node, ConfigPath: writeConfig(t, "remote: {inCluster: true}\nnamespace: from-a\nsourceCluster: a\nsigningKeyFile: "+tt.key+"\n")})
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("node %s, key %s: %v, want an error containing %q", tt.node, tt.key, err, tt.want)
		}
	}
}

// TestConfigReflection: the services, home and reflection fields are
// checked, each error naming its field, and their defaults filled in.
func TestConfigReflection(t *testing.T) {
	base := Config{SourceCluster: "a", SigningKeyFile: "/k"}
	for _, tt := range []struct {
		name  string
		edit  func(*Config)
		error string
	}{
		{"defaults", func(*Config) {}, ""},
		{"select", func(c *Config) { c.Services.Select = "some" }, "services.select"},
		{"namespace", func(c *Config) { c.Services.Namespaces = []string{"Bad_NS"} }, "services.namespaces[0]"},
		{"selector", func(c *Config) { c.Services.LabelSelector = "a in (" }, "services.labelSelector"},
		{"home scheme", func(c *Config) { c.Home.APIServer = "http://a:6443" }, "home.apiServer"},
		{"home path", func(c *Config) { c.Home.APIServer = "https://a:6443/api" }, "home.apiServer"},
		{"home port", func(c *Config) { c.Home.APIServer = "https://a:0" }, "home.apiServer"},
		{"home", func(c *Config) { c.Home.APIServer = "https://10.0.0.1" }, ""},
		{"objects", func(c *Config) { c.Reflection.MaxObjects = -1 }, "reflection.maxObjects"},
		{"bytes", func(c *Config) { c.Reflection.MaxBytes = "lots" }, "reflection.maxBytes"},
		{"no bytes", func(c *Config) { c.Reflection.MaxBytes = "0" }, "reflection.maxBytes"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			tt.edit(&cfg)
			err := cfg.validatePolicy()
			switch {
			case tt.error == "" && err != nil:
				t.Fatal(err)
			case tt.error != "" && (err == nil || !strings.HasPrefix(err.Error(), tt.error)):
				t.Fatalf("error %v, want one naming %s", err, tt.error)
			case err == nil && (cfg.Services.Select != SelectUsed || cfg.Reflection.MaxObjects != DefaultMaxObjects || cfg.maxBytes() != 256<<20):
				t.Errorf("defaults: %+v %+v", cfg.Services, cfg.Reflection)
			}
		})
	}
	if host, port, err := (HomeConfig{APIServer: "https://10.0.0.1"}).hostPort(); err != nil || host != "10.0.0.1" || port != "443" {
		t.Errorf("hostPort: %q %q %v", host, port, err)
	}
}
