package commands

import (
	"bytes"
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/vkubelet/virtual-kubelet/internal/provider"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testpki"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/providers/grpcplugin"
)

// TestSubcommandHelp: a subcommand's --help lists its flags (it once
// recursed forever through the root's usage).
func TestSubcommandHelp(t *testing.T) {
	for _, sub := range []string{"plugin", "version"} {
		code, out, _ := run(t, sub, "--help")
		if code != 0 || !strings.Contains(out, "Usage:\n  virtual-kubelet "+sub) {
			t.Errorf("%s --help: %d %q", sub, code, out)
		}
	}
	if code, _, errOut := run(t, "plugin", "--provider", "mock"); code != 1 || !strings.Contains(errOut, "--listen are required") {
		t.Errorf("plugin without --listen: %d %q", code, errOut)
	}
	sock := "unix://" + filepath.Join(t.TempDir(), "p.sock")
	if code, _, errOut := run(t, "plugin", "--provider", "mock", "--listen", sock, "--pprof-address", "0.0.0.0:6060"); code != 1 || !strings.Contains(errOut, `--pprof-address "0.0.0.0:6060": want a loopback`) {
		t.Errorf("plugin with /debug/pprof on every interface: %d %q", code, errOut)
	}
}

// TestPluginServesMutualTLS: `virtual-kubelet plugin` on host:port with
// mutual TLS answers --provider grpc with the client certificate, and no
// one without it.
func TestPluginServesMutualTLS(t *testing.T) {
	dir := t.TempDir()
	files := writeTestPKI(t, dir)
	lis, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := lis.Addr().String()
	lis.Close()
	ctx, cancel := context.WithCancel(context.Background())
	exited := make(chan int, 1)
	var out bytes.Buffer
	go func() {
		exited <- execute(ctx, []string{"plugin", "--provider", "mock", "--nodename", "vk0", "--listen", addr,
			"--tls-cert-file", files["server.crt"], "--tls-key-file", files["server.key"], "--tls-client-ca-file", files["ca.crt"]}, &out, &out)
	}()
	defer func() {
		cancel()
		if code := <-exited; code != 0 {
			t.Errorf("plugin exited %d: %s", code, out.String())
		}
	}()

	dial := func(config string) (node.Provider, error) {
		path := filepath.Join(dir, "grpc.yaml")
		if err := os.WriteFile(path, []byte("endpoint: "+addr+"\nconnectTimeout: 5s\n"+config), 0o600); err != nil {
			t.Fatal(err)
		}
		return grpcplugin.New(ctx, provider.InitConfig{ConfigPath: path, NodeName: "vk0"})
	}
	p, err := dial(fmt.Sprintf("tls: {caFile: %s, certFile: %s, keyFile: %s, serverName: plugin.test}\n", files["ca.crt"], files["client.crt"], files["client.key"]))
	if err != nil {
		t.Fatal(err)
	}
	capacity := p.Capacity(ctx)
	if err := p.(node.NodeProvider).Ping(ctx); err != nil || capacity.Cpu().IsZero() {
		t.Errorf("Ping over mutual TLS: %v, capacity %v", err, capacity)
	}
	if _, err := dial("insecure: true\n"); err == nil || !strings.Contains(err.Error(), "handshake") {
		t.Errorf("without TLS: %v, want a failed handshake", err)
	}
}

// writeTestPKI writes a CA's certificate and, signed by it, a serving
// certificate for plugin.test and a client certificate with their keys; it
// returns their paths by name.
func writeTestPKI(t *testing.T, dir string) map[string]string {
	t.Helper()
	ca, err := testpki.NewAuthority("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]string{}
	write := func(name string, data []byte) {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
		files[name] = path
	}
	write("ca.crt", ca.CertPEM())
	for name, leaf := range map[string]testpki.Leaf{
		"server": {CommonName: "server", DNSNames: []string{"plugin.test"}, Server: true},
		"client": {CommonName: "client", Client: true},
	} {
		p, err := ca.Issue(leaf)
		if err != nil {
			t.Fatal(err)
		}
		key, err := p.KeyPEM()
		if err != nil {
			t.Fatal(err)
		}
		write(name+".crt", p.CertPEM())
		write(name+".key", key)
	}
	return files
}
