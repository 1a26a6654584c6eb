package node

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes/fake"
	"k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/node/internal/podips"
)

// assigningProvider chooses IPs as told, and remembers what it was offered.
type assigningProvider struct {
	nopProvider
	ips     []string
	err     error
	offered [][]string
}

func (p *assigningProvider) AssignPodIPs(_ context.Context, pod *corev1.Pod) ([]string, error) {
	p.offered = append(p.offered, podips.Of(pod.Status.PodIPs))
	if p.ips == nil && p.err == nil {
		return podips.Of(pod.Status.PodIPs), nil
	}
	return p.ips, p.err
}

func ipController(t *testing.T, p PodLifecycleHandler, cidrs []string, edit func(*PodControllerConfig)) *PodController {
	t.Helper()
	client := fake.NewClientset()
	cfg := PodControllerConfig{
		PodClient: client.CoreV1(), PodInformer: informers.NewSharedInformerFactory(client, 0).Core().V1().Pods(),
		EventRecorder: record.NewFakeRecorder(10), Provider: p,
	}
	if cidrs != nil {
		cfg.PodCIDRs = func(context.Context) ([]string, error) { return cidrs, nil }
	}
	if edit != nil {
		edit(&cfg)
	}
	pc, err := NewPodController(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return pc
}

func podIPsOf(t *testing.T, pc *PodController, pod *corev1.Pod) []string {
	t.Helper()
	got, err := pc.withPodIPs(context.Background(), pod)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Status.PodIPs) > 0 && got.Status.PodIP != got.Status.PodIPs[0].IP {
		t.Errorf("podIP %q is not the first of podIPs %v", got.Status.PodIP, got.Status.PodIPs)
	}
	return podips.Of(got.Status.PodIPs)
}

func TestPodIPsFromTheNodesCIDRs(t *testing.T) {
	pc := ipController(t, nopProvider{}, []string{"10.244.3.0/24", "fd00:3::/64"}, nil)
	pod := testPod("u1", corev1.PodStatus{})
	want := []string{"10.244.3.2", "fd00:3::2"}
	if got := podIPsOf(t, pc, pod); !slices.Equal(got, want) {
		t.Fatalf("IPs = %v, want %v", got, want)
	}
	if pod.Status.PodIP != "" {
		t.Error("the informer's pod was changed")
	}
	// Decided once: asked again (a retried CreatePod), the same.
	if got := podIPsOf(t, pc, pod); !slices.Equal(got, want) {
		t.Errorf("asked again: %v", got)
	}
	// Another pod gets the next; once the first is gone its IPs are free.
	other := testPod("u2", corev1.PodStatus{})
	other.Name = "q"
	if got := podIPsOf(t, pc, other); got[0] != "10.244.3.3" {
		t.Errorf("second pod: %v", got)
	}
	pc.forget("ns/p")
	if n := pc.ips.InUse(); n != 2 {
		t.Errorf("addresses in use after the pod is gone: %d, want 2", n)
	}
}

func TestPodIPsKeptFromStatus(t *testing.T) {
	p := &assigningProvider{}
	pc := ipController(t, p, []string{"10.244.3.0/24"}, nil)
	pod := testPod("u1", corev1.PodStatus{PodIP: "10.244.3.2", PodIPs: []corev1.PodIP{{IP: "10.244.3.2"}}})
	if got := podIPsOf(t, pc, pod); !slices.Equal(got, []string{"10.244.3.2"}) {
		t.Fatalf("IPs = %v", got)
	}
	if len(p.offered) != 0 {
		t.Error("the provider was asked for a pod that has IPs")
	}
	other := testPod("u2", corev1.PodStatus{})
	other.Name = "q"
	if got := podIPsOf(t, pc, other); got[0] != "10.244.3.3" {
		t.Errorf("the next pod got %v; the kept IP is taken", got)
	}
}

func TestPodIPsChosenByTheProvider(t *testing.T) {
	// Without pod CIDRs the provider is offered nothing and chooses.
	p := &assigningProvider{ips: []string{"192.168.7.7"}}
	pc := ipController(t, p, nil, nil)
	if got := podIPsOf(t, pc, testPod("u1", corev1.PodStatus{})); !slices.Equal(got, p.ips) {
		t.Errorf("IPs = %v, want the provider's", got)
	}
	if len(p.offered) != 1 || len(p.offered[0]) != 0 {
		t.Errorf("offered %v, want nothing", p.offered)
	}

	// With them, it is offered one and may take it...
	p = &assigningProvider{}
	pc = ipController(t, p, []string{"10.244.3.0/24"}, nil)
	if got := podIPsOf(t, pc, testPod("u1", corev1.PodStatus{})); !slices.Equal(got, []string{"10.244.3.2"}) {
		t.Errorf("IPs = %v, want the offered one", got)
	}
	// ...or use its own, which frees the offered one.
	p = &assigningProvider{ips: []string{"192.168.7.7"}}
	pc = ipController(t, p, []string{"10.244.3.0/24"}, nil)
	if got := podIPsOf(t, pc, testPod("u1", corev1.PodStatus{})); !slices.Equal(got, p.ips) {
		t.Errorf("IPs = %v, want the provider's", got)
	}
	if n := pc.ips.InUse(); n != 0 {
		t.Errorf("%d offered addresses still held", n)
	}

	for _, tc := range []struct {
		p    *assigningProvider
		want string
	}{
		{&assigningProvider{err: errors.New("subnet full")}, "subnet full"},
		{&assigningProvider{ips: []string{"not-an-ip"}}, `"not-an-ip"`},
		{&assigningProvider{ips: []string{"10.0.0.1", "10.0.0.2"}}, "more than one"},
	} {
		pc := ipController(t, tc.p, []string{"10.244.3.0/24"}, nil)
		pod := testPod("u1", corev1.PodStatus{})
		if _, err := pc.withPodIPs(context.Background(), pod); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("provider answering %v, %v: error %v, want one with %q", tc.p.ips, tc.p.err, err, tc.want)
		}
		if n := pc.ips.InUse(); n != 0 {
			t.Errorf("%d offered addresses still held after a failure", n)
		}
	}
}

// TestPodIPsLeftToARuntimeThatResolvesEnv: a provider whose runtime
// resolves the environment gives pods their IPs itself.
func TestPodIPsLeftToARuntimeThatResolvesEnv(t *testing.T) {
	for _, edit := range []func(*PodControllerConfig){
		func(c *PodControllerConfig) { c.KeepEnvObjectRefs = true },
		func(c *PodControllerConfig) { c.SkipDownwardAPIResolution = true },
	} {
		p := &assigningProvider{}
		pc := ipController(t, p, []string{"10.244.3.0/24"}, edit)
		if got := podIPsOf(t, pc, testPod("u1", corev1.PodStatus{})); len(got) != 0 || len(p.offered) != 0 {
			t.Errorf("IPs %v given, provider asked %d times; want none", got, len(p.offered))
		}
	}
}
