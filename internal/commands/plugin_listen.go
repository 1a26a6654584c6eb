package commands

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/spf13/cobra"
	"google.golang.org/grpc/credentials"
)

// pluginListener is where and how `virtual-kubelet plugin` listens, checked
// before the provider starts: a unix socket with its mode, or a host:port
// with mutual TLS (nil only with --insecure).
type pluginListener struct {
	socket string // the unix socket's path; "" for host:port
	mode   fs.FileMode
	addr   string // host:port
	tls    credentials.TransportCredentials
}

// listener checks the --listen, TLS, --insecure and --socket-mode flags
// together. Whoever reaches the plugin drives every pod (create any spec,
// read resolved Secrets, exec), so host:port needs mutual TLS or an explicit
// --insecure, and a socket is only for its owner unless --socket-mode says.
func (o *pluginOptions) listener(cmd *cobra.Command) (*pluginListener, error) {
	withTLS := o.tlsCert != "" || o.tlsKey != "" || o.tlsClientCA != ""
	if path, ok := strings.CutPrefix(o.listen, "unix://"); ok {
		switch {
		case !filepath.IsAbs(path):
			return nil, fmt.Errorf("--listen %q: a unix socket needs an absolute path, unix:///path/to.sock", o.listen)
		case withTLS:
			return nil, errors.New("--tls-cert-file, --tls-key-file and --tls-client-ca-file are for a host:port --listen, not a unix socket")
		case o.insecure:
			return nil, errors.New("--insecure is for a host:port --listen; a unix socket is guarded by --socket-mode")
		}
		mode, err := parseSocketMode(o.socketMode)
		if err != nil {
			return nil, err
		}
		return &pluginListener{socket: path, mode: mode}, nil
	}
	if strings.Contains(o.listen, "://") {
		return nil, fmt.Errorf("--listen %q: unix:///path/to.sock or host:port", o.listen)
	}
	switch {
	case cmd.Flags().Changed("socket-mode"):
		return nil, errors.New("--socket-mode is for a unix:// --listen, not host:port")
	case withTLS && o.insecure:
		return nil, errors.New("--insecure and the --tls-* flags contradict each other: choose one")
	case o.insecure:
		return &pluginListener{addr: o.listen}, nil
	case !withTLS:
		return nil, fmt.Errorf("--listen %s is TCP: set --tls-cert-file, --tls-key-file and --tls-client-ca-file (mutual TLS), or --insecure to serve it unauthenticated", o.listen)
	}
	creds, err := serverTLS(o.tlsCert, o.tlsKey, o.tlsClientCA)
	if err != nil {
		return nil, err
	}
	return &pluginListener{addr: o.listen, tls: creds}, nil
}

// parseSocketMode reads --socket-mode: octal permission bits, nothing else.
func parseSocketMode(s string) (fs.FileMode, error) {
	m, err := strconv.ParseUint(s, 8, 32)
	if err != nil || m > 0o777 {
		return 0, fmt.Errorf("--socket-mode %q: want octal permission bits such as 0600", s)
	}
	return fs.FileMode(m), nil
}

// listen opens the listener: the TCP address, or the unix socket.
func (l *pluginListener) listen() (net.Listener, error) {
	if l.socket == "" {
		lis, err := net.Listen("tcp", l.addr)
		if err != nil {
			return nil, fmt.Errorf("--listen %s: %w", l.addr, err)
		}
		return lis, nil
	}
	lis, err := listenUnix(l.socket, l.mode)
	if err != nil {
		return nil, fmt.Errorf("--listen unix://%s: %w", l.socket, err)
	}
	return lis, nil
}

// listenUnix listens on a unix socket at path with permission mode. The
// socket is bound in a private directory, given its mode there and then
// linked into place, so that it is never reachable with the umask's
// permissions, not even for a moment. A socket a plugin that died left at
// path is replaced; any other file there is an error.
func listenUnix(path string, mode fs.FileMode) (net.Listener, error) {
	if fi, err := os.Lstat(path); err == nil && fi.Mode().Type() == fs.ModeSocket {
		if err := os.Remove(path); err != nil {
			return nil, err
		}
	}
	private, err := os.MkdirTemp(filepath.Dir(path), ".vk-plugin-")
	if err != nil {
		return nil, err
	}
	defer os.RemoveAll(private)
	bound := filepath.Join(private, "s")
	lis, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, err
	}
	// The bound name goes with the private directory: Close removes path.
	lis.SetUnlinkOnClose(false)
	if err := os.Chmod(bound, mode); err != nil {
		lis.Close()
		return nil, err
	}
	if err := os.Link(bound, path); err != nil {
		lis.Close()
		return nil, err
	}
	return &unixSocket{UnixListener: lis, path: path}, nil
}

// unixSocket is a unix socket listener whose Close also removes the
// socket's path.
type unixSocket struct {
	*net.UnixListener
	path string
}

// Close stops listening and removes the socket file.
func (l *unixSocket) Close() error {
	err := l.UnixListener.Close()
	if rmErr := os.Remove(l.path); rmErr != nil && !errors.Is(rmErr, fs.ErrNotExist) {
		err = errors.Join(err, rmErr)
	}
	return err
}
