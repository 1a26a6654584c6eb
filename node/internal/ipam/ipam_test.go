package ipam

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
)

func TestAllocateSkipsReservedAddressesAndGoesRound(t *testing.T) {
	a, err := New([]string{"10.244.1.0/29"}) // usable: .2 to .6
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for i := range 5 {
		ips, err := a.Allocate(fmt.Sprintf("ns/p%d", i))
		if err != nil {
			t.Fatalf("pod %d: %v", i, err)
		}
		got = append(got, ips...)
	}
	want := []string{"10.244.1.2", "10.244.1.3", "10.244.1.4", "10.244.1.5", "10.244.1.6"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	var exhausted *ExhaustedError
	if _, err := a.Allocate("ns/more"); !errors.As(err, &exhausted) || exhausted.CIDR != "10.244.1.0/29" {
		t.Fatalf("full range: %v, want an ExhaustedError naming the CIDR", err)
	}
	if ips, _ := a.Allocate("ns/p3"); !slices.Equal(ips, []string{"10.244.1.5"}) {
		t.Errorf("a pod asking again got %v, want its own address", ips)
	}
	a.Release("ns/p1")
	a.Release("ns/p3")
	// The search goes on from where it stopped: .3 before .5.
	if ips, err := a.Allocate("ns/q"); err != nil || ips[0] != "10.244.1.3" {
		t.Errorf("after release: %v, %v; want 10.244.1.3", ips, err)
	}
	if ips, err := a.Allocate("ns/r"); err != nil || ips[0] != "10.244.1.5" {
		t.Errorf("after release: %v, %v; want 10.244.1.5", ips, err)
	}
	if a.InUse() != 5 {
		t.Errorf("in use: %d, want 5", a.InUse())
	}
}

func TestAllocateDualStackOnePerFamily(t *testing.T) {
	a, err := New([]string{"10.244.0.0/24", "fd00:10:244::/64"})
	if err != nil {
		t.Fatal(err)
	}
	ips, err := a.Allocate("ns/p")
	if err != nil || !slices.Equal(ips, []string{"10.244.0.2", "fd00:10:244::2"}) {
		t.Fatalf("got %v, %v", ips, err)
	}
	// A full family takes nothing from the other.
	small, err := New([]string{"fd00::/126", "10.0.0.0/30"}) // v6: ::2 and ::3 (no broadcast); v4: .2 only
	if err != nil {
		t.Fatal(err)
	}
	if _, err := small.Allocate("ns/a"); err != nil {
		t.Fatal(err)
	}
	if _, err := small.Allocate("ns/b"); err == nil || !strings.Contains(err.Error(), "10.0.0.0/30") {
		t.Fatalf("v4 full: %v", err)
	}
	if small.InUse() != 2 {
		t.Errorf("in use after a failed allocation: %d, want 2", small.InUse())
	}
}

func TestReserveKeepsAddressesPodsAlreadyHave(t *testing.T) {
	a, err := New([]string{"10.244.0.0/24"})
	if err != nil {
		t.Fatal(err)
	}
	// As after a restart: pods' IPs read back from the API server.
	a.Reserve("ns/old", []string{"10.244.0.2", "192.168.0.9", "bogus"})
	a.Reserve("ns/thief", []string{"10.244.0.2"})
	ips, err := a.Allocate("ns/new")
	if err != nil || ips[0] != "10.244.0.3" {
		t.Fatalf("got %v, %v; want 10.244.0.3", ips, err)
	}
	if ips, _ := a.Allocate("ns/old"); ips[0] != "10.244.0.2" {
		t.Errorf("reserved pod got %v", ips)
	}
	a.Release("ns/thief") // holds nothing: frees nothing
	if a.InUse() != 2 {
		t.Errorf("in use: %d, want 2", a.InUse())
	}
}

func TestNewRejectsBadCIDRs(t *testing.T) {
	for _, tc := range []struct {
		cidrs []string
		want  string
	}{
		{nil, "no pod CIDR"},
		{[]string{"10.244.0.0"}, `pod CIDR "10.244.0.0"`},
		{[]string{"10.0.0.0/24", "10.1.0.0/24"}, "same IP family"},
		{[]string{"10.0.0.0/31"}, "too small"},
	} {
		if _, err := New(tc.cidrs); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("New(%v): %v, want an error with %q", tc.cidrs, err, tc.want)
		}
	}
}
