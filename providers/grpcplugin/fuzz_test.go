package grpcplugin

import (
	"strings"
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/fuzzconfig"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// loadConfig loads the config file as New does.
func loadConfig(path string) (*Config, error) {
	var cfg Config
	if err := provider.LoadConfig(path, "the plugin's endpoint", &cfg, cfg.validate); err != nil {
		return nil, err
	}
	return &cfg, nil
}

// FuzzConfig: whatever the provider config file holds, loading it does not
// panic; a refusal names the file and the field; an accepted config has
// positive timeouts, a unix socket endpoint without TLS or a host:port one
// with TLS or insecure: true, and written back loads the same.
func FuzzConfig(f *testing.F) {
	fuzzconfig.Fuzz(f, []string{
		"endpoint: unix:///run/vk/plugin.sock\n",
		"endpoint: 127.0.0.1:19999\ninsecure: true\ncallTimeout: 5s\nconnectTimeout: 1m\n",
		"endpoint: plugin.example:443\ntls: {caFile: /ca.pem, certFile: /c.pem, keyFile: /k.pem, serverName: plugin}\n",
		"endpoint: unix://relative.sock\n",
		"endpoint: unix:///s.sock\ntls: {caFile: /ca.pem, certFile: /c.pem, keyFile: /k.pem}\n",
		"endpoint: 127.0.0.1:1\n",
		"endpoint: http://x\n",
		"endpoint: h:1\ntls: {caFile: /ca.pem}\n",
		"endpoint: h:1\ninsecure: true\ncallTimeout: -1s\n",
		"endpoint: h:1\ninsecure: true\ncallTimeout: forever\n",
		"endpoint: [",
		"",
	}, loadConfig, func(t *testing.T, cfg *Config) {
		if cfg.CallTimeout.Duration <= 0 || cfg.ConnectTimeout.Duration <= 0 {
			t.Fatalf("timeouts %s and %s accepted", cfg.CallTimeout.Duration, cfg.ConnectTimeout.Duration)
		}
		unix := strings.HasPrefix(cfg.Endpoint, "unix:///")
		if unix && cfg.TLS != nil || !unix && (strings.Contains(cfg.Endpoint, "://") || cfg.TLS == nil && !cfg.Insecure) {
			t.Fatalf("endpoint %q accepted with tls %+v, insecure %v", cfg.Endpoint, cfg.TLS, cfg.Insecure)
		}
	})
}
