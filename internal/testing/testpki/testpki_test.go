package testpki

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"
)

func TestIssuedPairsAuthenticateBothWays(t *testing.T) {
	ca, err := NewAuthority("test CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	server, err := ca.Issue(Leaf{CommonName: "node", IPs: []net.IP{net.IPv4(127, 0, 0, 1)}, Server: true})
	if err != nil {
		t.Fatal(err)
	}
	client, err := ca.Issue(Leaf{CommonName: "user", Organization: []string{"group"}, Client: true})
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewAuthority("other CA", time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	stranger, err := other.Issue(Leaf{CommonName: "stranger", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	// The server's pair goes through PEM, as the control plane writes it.
	keyPEM, err := server.KeyPEM()
	if err != nil {
		t.Fatal(err)
	}
	served, err := tls.X509KeyPair(server.CertPEM(), keyPEM)
	if err != nil {
		t.Fatalf("reading the PEM pair back: %v", err)
	}
	ln, err := tls.Listen("tcp", "127.0.0.1:0", &tls.Config{
		Certificates: []tls.Certificate{served}, ClientCAs: ca.Pool(), ClientAuth: tls.RequireAndVerifyClientCert,
	})
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	peers := make(chan string, 2)
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			tc := c.(*tls.Conn)
			if tc.Handshake() == nil {
				peers <- tc.ConnectionState().PeerCertificates[0].Subject.Organization[0]
			} else {
				peers <- ""
			}
			c.Close()
		}
	}()
	dial := func(p Pair) error {
		c, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: ca.Pool(), Certificates: []tls.Certificate{p.TLS()}})
		if err != nil {
			return err
		}
		defer c.Close()
		_, err = c.Read(make([]byte, 1)) // the server's verdict on our certificate arrives after the handshake
		if err != nil && !strings.Contains(err.Error(), "EOF") {
			return err
		}
		return nil
	}
	if err := dial(client); err != nil {
		t.Fatalf("a client of the CA: %v", err)
	}
	if got := <-peers; got != "group" {
		t.Errorf("the server saw the client's organization as %q, want group", got)
	}
	if err := dial(stranger); err == nil {
		t.Error("a client of another CA was let in")
	}
	if got := <-peers; got != "" {
		t.Errorf("the server accepted a client of another CA (organization %q)", got)
	}
	if _, err := tls.Dial("tcp", ln.Addr().String(), &tls.Config{RootCAs: other.Pool(), Certificates: []tls.Certificate{client.TLS()}}); err == nil {
		t.Error("a client trusting another CA accepted the server")
	}
}

func TestValidity(t *testing.T) {
	ca, err := NewAuthority("test CA", 2*time.Hour)
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(Leaf{CommonName: "x", Client: true})
	if err != nil {
		t.Fatal(err)
	}
	for name, p := range map[string]Pair{"authority": ca.Pair, "leaf": leaf} {
		if d := time.Until(p.Cert.NotAfter); d < time.Hour+55*time.Minute || d > 2*time.Hour {
			t.Errorf("%s: valid for %v more, want about 2h", name, d)
		}
		if !p.Cert.NotBefore.Before(time.Now()) {
			t.Errorf("%s: not valid yet (from %v)", name, p.Cert.NotBefore)
		}
	}
	if !ca.Cert.IsCA || leaf.Cert.IsCA {
		t.Errorf("IsCA: authority %v, leaf %v", ca.Cert.IsCA, leaf.Cert.IsCA)
	}
	if ca.Cert.SerialNumber.Cmp(leaf.Cert.SerialNumber) == 0 {
		t.Error("the authority and its leaf share a serial number")
	}
}
