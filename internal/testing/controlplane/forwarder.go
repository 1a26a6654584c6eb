package controlplane

import (
	"io"
	"net"
	"sync"
)

// forwarder relays TCP connections from listen to target. It exposes the
// loopback apiserver on a node network's gateway, since the apiserver binds a
// single address. TLS passes through untouched.
type forwarder struct {
	l      net.Listener
	target string
	wg     sync.WaitGroup

	mu    sync.Mutex
	conns map[net.Conn]struct{}
}

func startForwarder(listen, target string) (*forwarder, error) {
	l, err := net.Listen("tcp", listen)
	if err != nil {
		return nil, err
	}
	f := &forwarder{l: l, target: target, conns: map[net.Conn]struct{}{}}
	f.wg.Add(1)
	go f.serve()
	return f, nil
}

func (f *forwarder) serve() {
	defer f.wg.Done()
	for {
		in, err := f.l.Accept()
		if err != nil {
			return
		}
		f.wg.Add(1)
		go func() {
			defer f.wg.Done()
			f.relay(in)
		}()
	}
}

func (f *forwarder) track(c net.Conn, add bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if add {
		f.conns[c] = struct{}{}
	} else {
		delete(f.conns, c)
	}
}

func (f *forwarder) relay(in net.Conn) {
	defer in.Close()
	out, err := net.Dial("tcp", f.target)
	if err != nil {
		return
	}
	defer out.Close()
	f.track(in, true)
	f.track(out, true)
	defer f.track(in, false)
	defer f.track(out, false)

	done := make(chan struct{}, 2)
	pipe := func(dst, src net.Conn) {
		_, _ = io.Copy(dst, src)
		// Half-close so the peer sees EOF while the other direction drains.
		if tc, ok := dst.(*net.TCPConn); ok {
			_ = tc.CloseWrite()
		}
		done <- struct{}{}
	}
	go pipe(out, in)
	go pipe(in, out)
	<-done
	<-done
}

func (f *forwarder) close() {
	_ = f.l.Close()
	f.mu.Lock()
	for c := range f.conns {
		_ = c.Close()
	}
	f.mu.Unlock()
	f.wg.Wait()
}
