//go:build e2e

package plugins_test

import (
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/credentials/insecure"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
	"github.com/vkubelet/virtual-kubelet/internal/testing/freeport"
	"github.com/vkubelet/virtual-kubelet/internal/testing/testpki"
	pb "github.com/vkubelet/virtual-kubelet/plugin/providerv1alpha1"
	"github.com/vkubelet/virtual-kubelet/plugin/wire"
)

// Whoever reaches a plugin drives every pod of its node: these tests attack
// `virtual-kubelet plugin` the way a stranger on the network or the host
// would.

// pluginPKI is the plugin's CA with a serving and a client certificate,
// and a client certificate of another CA.
type pluginPKI struct {
	dir                    string
	ca                     *testpki.Authority
	server, client, forged testpki.Pair
}

func newPluginPKI(t *testing.T) *pluginPKI {
	t.Helper()
	authority := func(name string) *testpki.Authority {
		a, err := testpki.NewAuthority(name, time.Hour)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	issue := func(a *testpki.Authority, leaf testpki.Leaf) testpki.Pair {
		p, err := a.Issue(leaf)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	k := &pluginPKI{dir: t.TempDir(), ca: authority("plugin CA")}
	k.server = issue(k.ca, testpki.Leaf{CommonName: "plugin", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	k.client = issue(k.ca, testpki.Leaf{CommonName: "daemon", Client: true})
	k.forged = issue(authority("another CA"), testpki.Leaf{CommonName: "daemon", Client: true})
	return k
}

// write writes p's certificate and key and returns their paths.
func (k *pluginPKI) write(t *testing.T, name string, p testpki.Pair) (cert, key string) {
	t.Helper()
	keyPEM, err := p.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	cert, key = filepath.Join(k.dir, name+".crt"), filepath.Join(k.dir, name+".key")
	for path, data := range map[string][]byte{cert: p.CertPEM(), key: keyPEM} {
		if err := os.WriteFile(path, data, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key
}

// clientTLS is a client that trusts the plugin CA and presents cert, if any.
func (k *pluginPKI) clientTLS(cert *testpki.Pair) credentials.TransportCredentials {
	c := &tls.Config{RootCAs: k.ca.Pool(), MinVersion: tls.VersionTLS12}
	if cert != nil {
		c.Certificates = []tls.Certificate{cert.TLS()}
	}
	return credentials.NewTLS(c)
}

// handshake makes the contract's first call to the plugin at target with
// creds, as any gRPC client can.
func handshake(t *testing.T, target string, creds credentials.TransportCredentials) error {
	t.Helper()
	conn, err := grpc.NewClient(target, grpc.WithTransportCredentials(creds))
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_, err = pb.NewPluginClient(conn).Handshake(ctx, &pb.HandshakeRequest{ProtocolVersion: wire.ProtocolVersion})
	return err
}

// waitServing waits for the plugin to say it serves.
func waitServing(t *testing.T, p *daemontest.Plugin) {
	t.Helper()
	daemontest.Eventually(t, "the plugin serves", func() (bool, string) {
		return strings.Contains(p.Output.String(), "serving provider") || p.Exited(), p.Output.String()
	})
	if p.Exited() {
		t.Fatalf("the plugin exited: %s", p.Output.String())
	}
}

// TestPluginOnTCPRefusesStrangers: the plugin on a loopback port with
// mutual TLS answers the daemon's client certificate only. A plain gRPC
// client, a TLS client without a certificate and one with a certificate
// of another CA all fail the handshake.
func TestPluginOnTCPRefusesStrangers(t *testing.T) {
	k := newPluginPKI(t)
	serverCert, serverKey := k.write(t, "server", k.server)
	caFile := filepath.Join(k.dir, "ca.crt")
	if err := os.WriteFile(caFile, k.ca.CertPEM(), 0o600); err != nil {
		t.Fatal(err)
	}
	addr := fmt.Sprintf("127.0.0.1:%d", freeport.Get(t))
	p := daemontest.StartPluginWith(t, "--provider", "mock", "--nodename", "vk-tls", "--listen", addr,
		"--tls-cert-file", serverCert, "--tls-key-file", serverKey, "--tls-client-ca-file", caFile)
	waitServing(t, p)

	if err := handshake(t, addr, k.clientTLS(&k.client)); err != nil {
		t.Fatalf("the daemon's certificate: %v", err)
	}
	for name, creds := range map[string]credentials.TransportCredentials{
		"a plain gRPC client":              insecure.NewCredentials(),
		"TLS without a client certificate": k.clientTLS(nil),
		"a certificate of another CA":      k.clientTLS(&k.forged),
	} {
		if err := handshake(t, addr, creds); err == nil {
			t.Errorf("%s was served", name)
		}
	}
	if strings.Contains(p.Output.String(), "WARNING") {
		t.Errorf("a warning with mutual TLS:\n%s", p.Output.String())
	}
}

// TestPluginOnTCPWithoutTLS: a host:port without TLS is refused at start,
// in one line naming the flags; --insecure serves it and warns.
func TestPluginOnTCPWithoutTLS(t *testing.T) {
	addr := fmt.Sprintf("127.0.0.1:%d", freeport.Get(t))
	code, out := daemontest.Run(t, "plugin", "--provider", "mock", "--listen", addr)
	if code != 1 || strings.Count(out, "\n") != 0 ||
		!strings.Contains(out, "--tls-cert-file, --tls-key-file and --tls-client-ca-file") || !strings.Contains(out, "--insecure") {
		t.Errorf("TCP without TLS: exit %d, %q; want exit 1 and one line naming the TLS flags and --insecure", code, out)
	}
	if err := handshake(t, addr, insecure.NewCredentials()); err == nil {
		t.Error("something serves on the refused address")
	}

	p := daemontest.StartPluginWith(t, "--provider", "mock", "--nodename", "vk-insecure", "--listen", addr, "--insecure")
	waitServing(t, p)
	if err := handshake(t, addr, insecure.NewCredentials()); err != nil {
		t.Fatalf("--insecure: %v", err)
	}
	if want := "WARNING: --insecure: serving " + addr + " without TLS or client authentication"; !strings.Contains(p.Output.String(), want) {
		t.Errorf("--insecure without the warning %q:\n%s", want, p.Output.String())
	}
}

// TestPluginSocketMode: a unix socket is its owner's only (0600), or has
// the mode --socket-mode names; a stale socket is replaced, and the socket
// is gone when the plugin stops.
func TestPluginSocketMode(t *testing.T) {
	// A unix socket's path has at most 107 bytes: not under t.TempDir.
	dir, err := os.MkdirTemp("", "vkplugin")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	for _, tc := range []struct {
		flags []string
		want  os.FileMode
	}{{nil, 0o600}, {[]string{"--socket-mode", "0660"}, 0o660}} {
		sock := filepath.Join(dir, "mock.sock")
		stale, err := net.Listen("unix", sock)
		if err != nil {
			t.Fatal(err)
		}
		stale.(*net.UnixListener).SetUnlinkOnClose(false)
		stale.Close()
		p := daemontest.StartPluginWith(t, append([]string{"--provider", "mock", "--listen", "unix://" + sock}, tc.flags...)...)
		waitServing(t, p)
		fi, err := os.Stat(sock)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Type() != os.ModeSocket || fi.Mode().Perm() != tc.want {
			t.Errorf("%v: socket mode %v, want %v", tc.flags, fi.Mode(), os.ModeSocket|tc.want)
		}
		if err := handshake(t, "unix://"+sock, insecure.NewCredentials()); err != nil {
			t.Errorf("%v: the owner's handshake: %v", tc.flags, err)
		}
		p.Stop(10 * time.Second)
		entries, _ := os.ReadDir(dir)
		if len(entries) != 0 {
			t.Errorf("%v: left behind after the plugin stopped: %v", tc.flags, entries)
		}
	}
	code, out := daemontest.Run(t, "plugin", "--provider", "mock", "--listen", "unix://"+filepath.Join(dir, "x.sock"), "--socket-mode", "rw")
	if code != 1 || !strings.Contains(out, `--socket-mode "rw": want octal permission bits`) {
		t.Errorf("--socket-mode rw: exit %d, %q", code, out)
	}
}
