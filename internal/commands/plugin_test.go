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

	"github.com/vkubelet/virtual-kubelet/internal/testing/testpki"
	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/provider"
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

// TestPluginListenFlags: --listen, the TLS flags, --insecure and
// --socket-mode are checked together before the provider starts, each
// contradiction in one line naming the flags.
func TestPluginListenFlags(t *testing.T) {
	sock := "unix://" + filepath.Join(t.TempDir(), "p.sock")
	tls := []string{"--tls-cert-file", "c", "--tls-key-file", "k", "--tls-client-ca-file", "ca"}
	for _, tc := range []struct {
		args []string
		want string
	}{
		{[]string{"--listen", "127.0.0.1:1"}, "plugin: --listen 127.0.0.1:1 is TCP: set --tls-cert-file, --tls-key-file and --tls-client-ca-file (mutual TLS), or --insecure to serve it unauthenticated"},
		{[]string{"--listen", "127.0.0.1:1", "--tls-cert-file", "c"}, "--tls-cert-file, --tls-key-file and --tls-client-ca-file go together"},
		{append([]string{"--listen", "127.0.0.1:1", "--insecure"}, tls...), "--insecure and the --tls-* flags contradict each other"},
		{[]string{"--listen", "127.0.0.1:1", "--insecure", "--socket-mode", "0600"}, "--socket-mode is for a unix:// --listen"},
		{[]string{"--listen", sock, "--insecure"}, "--insecure is for a host:port --listen"},
		{append([]string{"--listen", sock}, tls...), "are for a host:port --listen, not a unix socket"},
		{[]string{"--listen", sock, "--socket-mode", "0999"}, `--socket-mode "0999": want octal permission bits`},
		{[]string{"--listen", sock, "--socket-mode", "01777"}, `--socket-mode "01777": want octal permission bits`},
		{[]string{"--listen", "unix://p.sock"}, "a unix socket needs an absolute path"},
		{[]string{"--listen", "tcp://127.0.0.1:1"}, "unix:///path/to.sock or host:port"},
	} {
		code, _, errOut := run(t, append([]string{"plugin", "--provider", "mock"}, tc.args...)...)
		if code != 1 || !strings.Contains(errOut, tc.want) || strings.Count(errOut, "\n") != 1 {
			t.Errorf("%v: exit %d, %q; want one line with %q", tc.args, code, errOut, tc.want)
		}
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
