package api

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// TestHijackedConnClosesWithoutReset: a session that closes its hijacked
// connection while bytes from the client are still unread (a WebSocket
// ping that came in with its last frames) shuts it down cleanly: the
// client reads the session's last bytes and then EOF, not a reset.
func TestHijackedConnClosesWithoutReset(t *testing.T) {
	for _, useTLS := range []bool{false, true} {
		t.Run(fmt.Sprintf("tls=%v", useTLS), func(t *testing.T) {
			unread := make(chan struct{})
			closed := make(chan error, 1)
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w, r, ok := watchHijack(w, r)
				if !ok {
					closed <- errors.New("cannot hijack")
					return
				}
				conn, rw, err := w.(http.Hijacker).Hijack()
				if err != nil {
					closed <- err
					return
				}
				_, _ = rw.WriteString("HTTP/1.1 101 Switching Protocols\r\n\r\nready\n")
				_ = rw.Flush()
				// The client's next bytes are in the socket, and nothing reads them.
				<-unread
				if err := waitUnread(conn); err != nil {
					closed <- err
					return
				}
				_, _ = rw.WriteString("final status\n")
				_ = rw.Flush()
				closed <- conn.Close()
				<-r.Context().Done() // closing ends the session's context
			})
			srv := httptest.NewUnstartedServer(h)
			var conn net.Conn
			var err error
			if useTLS {
				srv.StartTLS()
				conn, err = tls.Dial("tcp", srv.Listener.Addr().String(), &tls.Config{InsecureSkipVerify: true}) //nolint:gosec // the test's own server
			} else {
				srv.Start()
				conn, err = net.Dial("tcp", srv.Listener.Addr().String())
			}
			t.Cleanup(srv.Close)
			if err != nil {
				t.Fatal(err)
			}
			defer conn.Close()
			if _, err := io.WriteString(conn, "GET / HTTP/1.1\r\nHost: node\r\nConnection: Upgrade\r\nUpgrade: test\r\n\r\n"); err != nil {
				t.Fatal(err)
			}
			br := bufio.NewReader(conn)
			for line := ""; line != "ready\n"; {
				if line, err = br.ReadString('\n'); err != nil {
					t.Fatalf("before the upgrade's end: %v", err)
				}
			}
			if _, err := io.WriteString(conn, "ping"); err != nil {
				t.Fatal(err)
			}
			close(unread)
			rest, err := io.ReadAll(br)
			if err != nil {
				t.Errorf("after %q: %v, want EOF", rest, err)
			}
			if string(rest) != "final status\n" {
				t.Errorf("read %q after the upgrade, want the final status", rest)
			}
			_ = conn.Close()
			select {
			case err := <-closed:
				if err != nil {
					t.Errorf("server side: %v", err)
				}
			case <-time.After(10 * time.Second):
				t.Fatal("the server's Close did not return")
			}
		})
	}
}

// waitUnread waits until conn's socket holds bytes nobody has read.
func waitUnread(conn net.Conn) error {
	conn = conn.(*watchedConn).Conn
	if tc, ok := conn.(*tls.Conn); ok {
		conn = tc.NetConn()
	}
	raw, err := conn.(syscall.Conn).SyscallConn()
	if err != nil {
		return err
	}
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		var n int
		var ierr error
		if err := raw.Control(func(fd uintptr) { n, ierr = unix.IoctlGetInt(int(fd), unix.SIOCINQ) }); err != nil {
			return err
		}
		if ierr != nil {
			return ierr
		}
		if n > 0 {
			return nil
		}
	}
	return errors.New("the client's bytes never reached the socket")
}
