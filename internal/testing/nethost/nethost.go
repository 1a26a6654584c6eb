// Package nethost gives a daemon under test an address the apiserver will
// proxy to. The apiserver refuses to proxy nodes/proxy and pods/proxy requests
// to loopback, so a daemon reached that way runs in a network namespace of its
// own, joined by a veth pair to a bridge in the root namespace:
//
//	root ns: bridge vkbr<i> 10.213.<i>.1/24 ── veth ── netns vk<i>-<host> 10.213.<i>.N/24
//
// Only these addresses are used; the machine's own interfaces are never
// touched. Everything here shells out to iproute2's ip(8) and needs root.
package nethost

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// subnetBase is the /16 the node networks are carved from, one /24 each.
var subnetBase = [2]byte{10, 213}

// maxIndex bounds how many node networks can exist at once.
const maxIndex = 250

// Network is a bridge in the root namespace that node hosts attach to.
type Network struct {
	Index   int          `json:"index"`
	Bridge  string       `json:"bridge"`
	Gateway netip.Addr   `json:"gateway"`
	Subnet  netip.Prefix `json:"subnet"`
}

// Host is a network namespace attached to a Network.
type Host struct {
	// Namespace is the netns name, usable with `ip netns exec`.
	Namespace string `json:"namespace"`
	// Addr is the host's address on the node network.
	Addr netip.Addr `json:"addr"`
	// Veth is the root-namespace end of the host's veth pair.
	Veth string `json:"veth"`
}

// Available reports why node hosts cannot be made here, or nil if they can.
func Available() error {
	if os.Geteuid() != 0 {
		return errors.New("node hosts need root (network namespaces and veth pairs)")
	}
	if _, err := exec.LookPath("ip"); err != nil {
		return errors.New("node hosts need ip(8) from iproute2: apt-get install iproute2")
	}
	return nil
}

func networkAt(index int) *Network {
	gw := netip.AddrFrom4([4]byte{subnetBase[0], subnetBase[1], byte(index), 1})
	return &Network{
		Index:   index,
		Bridge:  fmt.Sprintf("vkbr%d", index),
		Gateway: gw,
		Subnet:  netip.PrefixFrom(gw, 24).Masked(),
	}
}

// CreateNetwork creates the bridge for node network index, or, with index < 0,
// for the first index no other network uses. Creating the bridge is the
// allocation: two callers racing for one index cannot both succeed.
func CreateNetwork(ctx context.Context, index int) (*Network, error) {
	if err := Available(); err != nil {
		return nil, err
	}
	first, last := index, index
	if index < 0 {
		first, last = 0, maxIndex
	}
	if first > maxIndex {
		return nil, fmt.Errorf("node network index %d out of range 0-%d", index, maxIndex)
	}
	var lastErr error
	for i := first; i <= last; i++ {
		n := networkAt(i)
		if err := ip(ctx, "link", "add", n.Bridge, "type", "bridge"); err != nil {
			lastErr = err
			continue
		}
		if err := n.setUp(ctx); err != nil {
			_ = n.Delete(context.WithoutCancel(ctx))
			return nil, err
		}
		return n, nil
	}
	return nil, fmt.Errorf("no free node network in %d-%d: %w", first, last, lastErr)
}

func (n *Network) setUp(ctx context.Context) error {
	if err := ip(ctx, "addr", "add", netip.PrefixFrom(n.Gateway, 24).String(), "dev", n.Bridge); err != nil {
		return err
	}
	return ip(ctx, "link", "set", n.Bridge, "up")
}

func (n *Network) namespacePrefix() string { return fmt.Sprintf("vk%d-", n.Index) }

// HostNamespace is the netns name of the host called name on this network.
func (n *Network) HostNamespace(name string) string { return n.namespacePrefix() + name }

// AddHost creates a network namespace attached to the network, with an
// address of its own, loopback up and a default route through the gateway.
func (n *Network) AddHost(ctx context.Context, name string) (*Host, error) {
	ns := n.HostNamespace(name)
	if err := ip(ctx, "netns", "add", ns); err != nil {
		return nil, fmt.Errorf("creating node host %q: %w", name, err)
	}
	h, err := n.attach(ctx, ns)
	if err != nil {
		_ = ip(context.WithoutCancel(ctx), "netns", "del", ns)
		return nil, err
	}
	return h, nil
}

// Host returns the existing host called name, or an error if there is none.
func (n *Network) Host(ctx context.Context, name string) (*Host, error) {
	ns := n.HostNamespace(name)
	out, err := ipOutput(ctx, "-n", ns, "-j", "addr", "show")
	if err != nil {
		return nil, fmt.Errorf("node host %q: %w", name, err)
	}
	var links []struct {
		IfName   string `json:"ifname"`
		AddrInfo []struct {
			Family string `json:"family"`
			Local  string `json:"local"`
		} `json:"addr_info"`
	}
	if err := json.Unmarshal(out, &links); err != nil {
		return nil, fmt.Errorf("reading addresses of node host %q: %w", name, err)
	}
	for _, l := range links {
		for _, a := range l.AddrInfo {
			addr, err := netip.ParseAddr(a.Local)
			if err == nil && n.Subnet.Contains(addr) {
				return &Host{Namespace: ns, Addr: addr, Veth: strings.TrimSuffix(l.IfName, "p")}, nil
			}
		}
	}
	return nil, fmt.Errorf("node host %q has no address on %s", name, n.Subnet)
}

// attach gives the namespace the first free address. The veth name encodes the
// address, so creating the link is the allocation.
func (n *Network) attach(ctx context.Context, ns string) (*Host, error) {
	var lastErr error
	for octet := 2; octet < 255; octet++ {
		veth := fmt.Sprintf("vk%dh%d", n.Index, octet)
		peer := veth + "p"
		if err := ip(ctx, "link", "add", veth, "type", "veth", "peer", "name", peer, "netns", ns); err != nil {
			lastErr = err
			continue
		}
		addr := netip.AddrFrom4([4]byte{subnetBase[0], subnetBase[1], byte(n.Index), byte(octet)})
		steps := [][]string{
			{"link", "set", veth, "master", n.Bridge},
			{"link", "set", veth, "up"},
			{"-n", ns, "addr", "add", netip.PrefixFrom(addr, 24).String(), "dev", peer},
			{"-n", ns, "link", "set", peer, "up"},
			{"-n", ns, "link", "set", "lo", "up"},
			{"-n", ns, "route", "add", "default", "via", n.Gateway.String()},
			// The address may have belonged to a host deleted moments ago:
			// the root namespace's neighbour entry would still name its
			// MAC, and connections to the new host would vanish for up to
			// the entry's reachable time (30 s or so) until it went stale.
			{"neigh", "flush", "to", addr.String(), "dev", n.Bridge},
		}
		for _, s := range steps {
			if err := ip(ctx, s...); err != nil {
				_ = ip(context.WithoutCancel(ctx), "link", "del", veth)
				return nil, err
			}
		}
		return &Host{Namespace: ns, Addr: addr, Veth: veth}, nil
	}
	return nil, fmt.Errorf("no free address on %s: %w", n.Subnet, lastErr)
}

// Command runs name with args inside the host's network namespace.
func (h *Host) Command(ctx context.Context, name string, args ...string) *exec.Cmd {
	return exec.CommandContext(ctx, "ip", append([]string{"netns", "exec", h.Namespace, name}, args...)...)
}

// Delete stops the processes still running in the host, then removes its
// namespace; the kernel removes its veth pair with it.
func (h *Host) Delete(ctx context.Context) error {
	return deleteNamespace(ctx, h.Namespace)
}

// deleteNamespace sends SIGTERM to the processes in the namespace, SIGKILL to
// those left after a few seconds, and deletes it.
func deleteNamespace(ctx context.Context, ns string) error {
	pids := func() []int {
		out, _ := ipOutput(ctx, "netns", "pids", ns)
		var pids []int
		for _, f := range strings.Fields(string(out)) {
			if pid, err := strconv.Atoi(f); err == nil {
				pids = append(pids, pid)
			}
		}
		return pids
	}
	signal := func(sig syscall.Signal) bool {
		p := pids()
		for _, pid := range p {
			_ = syscall.Kill(pid, sig)
		}
		return len(p) > 0
	}
	if signal(syscall.SIGTERM) {
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline) && len(pids()) > 0; {
			time.Sleep(100 * time.Millisecond)
		}
		signal(syscall.SIGKILL)
	}
	return ip(ctx, "netns", "del", ns)
}

// Delete removes every host on the network, then its bridge.
func (n *Network) Delete(ctx context.Context) error {
	out, err := ipOutput(ctx, "netns", "list")
	if err != nil {
		return err
	}
	var errs []error
	for _, line := range strings.Split(string(out), "\n") {
		fields := strings.Fields(line)
		if len(fields) > 0 && strings.HasPrefix(fields[0], n.namespacePrefix()) {
			errs = append(errs, deleteNamespace(ctx, fields[0]))
		}
	}
	errs = append(errs, ip(ctx, "link", "del", n.Bridge))
	return errors.Join(errs...)
}

func ip(ctx context.Context, args ...string) error {
	_, err := ipOutput(ctx, args...)
	return err
}

func ipOutput(ctx context.Context, args ...string) ([]byte, error) {
	var stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, "ip", args...)
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("ip %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
