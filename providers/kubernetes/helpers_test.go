package kubernetes

import (
	"testing"
)

// testProvider is the provider of node vk-b of cluster "a", with cfg's
// namespace (from-a by default) and policy, and no remote cluster.
func testProvider(t testing.TB, cfg Config) *Provider {
	t.Helper()
	cfg.SourceCluster, cfg.SigningKeyFile = "a", "unused"
	if cfg.Namespace == "" && cfg.NamespacePrefix == "" {
		cfg.Namespace = "from-a"
	}
	if err := cfg.validatePolicy(); err != nil {
		t.Fatal(err)
	}
	policy, err := newPodPolicy(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	return &Provider{
		cfg:      &cfg,
		names:    namer{namespace: cfg.Namespace, prefix: cfg.NamespacePrefix, cluster: "a", node: "vk-b"},
		policy:   policy,
		trust:    signer{key: []byte("0123456789abcdef0123456789abcdef"), cluster: "a", node: "vk-b"},
		nodeName: "vk-b",
		budget:   newReflectionBudget(cfg.Reflection.MaxObjects, cfg.maxBytes()),
	}
}
