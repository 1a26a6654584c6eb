// Package ipam hands out pod IPs from a node's pod CIDRs (spec.podCIDRs),
// one address per CIDR, so a dual-stack node gives each pod one IPv4 and one
// IPv6 address. As a host-local IPAM plugin does for a kubelet, it skips
// each range's network address and the first address after it (the
// gateway), and the IPv4 broadcast address, and it goes round the range
// rather than handing a freed address out again at once.
package ipam

import (
	"fmt"
	"net/netip"
	"slices"
	"sync"
)

// ExhaustedError says a range has no free address left.
type ExhaustedError struct{ CIDR string }

func (e *ExhaustedError) Error() string {
	return fmt.Sprintf("no IP addresses available in range %s", e.CIDR)
}

// Allocator assigns addresses to owners (pods, by key); it is safe for
// concurrent use.
type Allocator struct {
	mu     sync.Mutex
	ranges []*ipRange
	owned  map[string][]netip.Addr
}

// ipRange is one CIDR's usable addresses and who holds them.
type ipRange struct {
	cidr        netip.Prefix
	first, last netip.Addr
	// next is where the search for a free address starts.
	next netip.Addr
	used map[netip.Addr]string
}

// New returns an allocator over cidrs (at most one per IP family, as
// spec.podCIDRs). An unparsable CIDR, two of one family or one too small to
// hold a pod address is an error naming it.
func New(cidrs []string) (*Allocator, error) {
	if len(cidrs) == 0 {
		return nil, fmt.Errorf("no pod CIDR")
	}
	a := &Allocator{owned: map[string][]netip.Addr{}}
	for _, s := range cidrs {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("pod CIDR %q: %w", s, err)
		}
		p = p.Masked()
		for _, r := range a.ranges {
			if r.cidr.Addr().Is4() == p.Addr().Is4() {
				return nil, fmt.Errorf("pod CIDRs %s and %s are of the same IP family", r.cidr, p)
			}
		}
		first, last := usable(p)
		if !first.IsValid() || last.Less(first) {
			return nil, fmt.Errorf("pod CIDR %s is too small to hold pod addresses", p)
		}
		a.ranges = append(a.ranges, &ipRange{cidr: p, first: first, last: last, next: first, used: map[netip.Addr]string{}})
	}
	return a, nil
}

// usable returns the first and last address of p a pod may get.
func usable(p netip.Prefix) (first, last netip.Addr) {
	b := p.Addr().AsSlice()
	for i := p.Bits(); i < len(b)*8; i++ {
		b[i/8] |= 0x80 >> (i % 8)
	}
	last, _ = netip.AddrFromSlice(b)
	if p.Addr().Is4() {
		last = last.Prev() // the broadcast address
	}
	return p.Addr().Next().Next(), last
}

// Allocate returns owner's addresses, one per range, taking free ones when
// owner holds none yet. When a range is full it takes nothing and returns
// an *ExhaustedError.
func (a *Allocator) Allocate(owner string) ([]string, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if ips, ok := a.owned[owner]; ok && len(ips) == len(a.ranges) {
		return toStrings(ips), nil
	}
	a.releaseLocked(owner)
	ips := make([]netip.Addr, 0, len(a.ranges))
	for _, r := range a.ranges {
		ip, ok := r.free()
		if !ok {
			for i, taken := range ips {
				delete(a.ranges[i].used, taken)
			}
			return nil, &ExhaustedError{CIDR: r.cidr.String()}
		}
		r.used[ip] = owner
		ips = append(ips, ip)
	}
	a.owned[owner] = ips
	return toStrings(ips), nil
}

// free finds a free address from next on, going round the range, and moves
// next past it.
func (r *ipRange) free() (netip.Addr, bool) {
	start := r.next
	for ip := start; ; {
		following := ip.Next()
		if !following.IsValid() || r.last.Less(following) {
			following = r.first
		}
		if _, taken := r.used[ip]; !taken {
			r.next = following
			return ip, true
		}
		if ip = following; ip == start {
			return netip.Addr{}, false
		}
	}
}

// Reserve records ips as owner's, for addresses a pod already has (from the
// API server after a restart). Addresses outside the ranges, unparsable or
// held by another owner are left alone.
func (a *Allocator) Reserve(owner string, ips []string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	for _, s := range ips {
		ip, err := netip.ParseAddr(s)
		if err != nil {
			continue
		}
		ip = ip.Unmap()
		for _, r := range a.ranges {
			if _, taken := r.used[ip]; taken || !r.cidr.Contains(ip) {
				continue
			}
			r.used[ip] = owner
			a.owned[owner] = append(a.owned[owner], ip)
		}
	}
}

// Release frees owner's addresses.
func (a *Allocator) Release(owner string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.releaseLocked(owner)
}

func (a *Allocator) releaseLocked(owner string) {
	for _, ip := range a.owned[owner] {
		for _, r := range a.ranges {
			if r.used[ip] == owner {
				delete(r.used, ip)
			}
		}
	}
	delete(a.owned, owner)
}

// InUse is the number of addresses held.
func (a *Allocator) InUse() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	n := 0
	for _, r := range a.ranges {
		n += len(r.used)
	}
	return n
}

// Owners is the number of owners holding addresses.
func (a *Allocator) Owners() int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.owned)
}

func toStrings(ips []netip.Addr) []string {
	out := make([]string, len(ips))
	for i, ip := range ips {
		out[i] = ip.String()
	}
	return slices.Clip(out)
}
