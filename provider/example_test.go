package provider_test

import (
	"context"
	"fmt"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// acme stands for a provider in a package (and module) of its own: it
// imports only public packages, and registers itself when a binary
// imports it, as a database/sql driver does. Its pods run nowhere; it
// keeps what it is given.
type acme struct {
	provider.NodeBasics
	cpu   resource.Quantity
	since time.Time
	mu    sync.Mutex
	pods  map[string]*corev1.Pod
}

func init() { provider.Register("acme", newAcme) }

// newAcme is the provider's InitFunc: it is built from the daemon's
// InitConfig, and reads the node's CPUs from a --provider-config file when
// one is given.
func newAcme(_ context.Context, cfg provider.InitConfig) (node.Provider, error) {
	conf := struct {
		CPU resource.Quantity `json:"cpu"`
	}{CPU: resource.MustParse("8")}
	if cfg.ConfigPath != "" {
		if err := provider.LoadConfig(cfg.ConfigPath, "the node's cpu", &conf, func() error { return nil }); err != nil {
			return nil, err
		}
	}
	return &acme{NodeBasics: provider.NodeBasicsFrom(cfg), cpu: conf.CPU, since: time.Now(), pods: map[string]*corev1.Pod{}}, nil
}

func (a *acme) Capacity(context.Context) corev1.ResourceList {
	return corev1.ResourceList{corev1.ResourceCPU: a.cpu, corev1.ResourcePods: resource.MustParse("110")}
}

func (a *acme) NodeConditions(context.Context) []corev1.NodeCondition {
	return provider.HealthyConditions(a.since, "acme")
}

func (a *acme) CreatePod(_ context.Context, pod *corev1.Pod) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	pod.Status.Phase = corev1.PodRunning
	a.pods[pod.Namespace+"/"+pod.Name] = pod
	return nil
}

func (a *acme) UpdatePod(ctx context.Context, pod *corev1.Pod) error { return a.CreatePod(ctx, pod) }

func (a *acme) DeletePod(_ context.Context, pod *corev1.Pod) error {
	a.mu.Lock()
	defer a.mu.Unlock()
	delete(a.pods, pod.Namespace+"/"+pod.Name)
	return nil
}

func (a *acme) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if pod, ok := a.pods[namespace+"/"+name]; ok {
		return pod.DeepCopy(), nil
	}
	return nil, errdefs.NotFoundf("pod %s/%s", namespace, name)
}

func (a *acme) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	return provider.PodStatusFrom(ctx, a.GetPod, namespace, name)
}

func (a *acme) GetPods(context.Context) ([]*corev1.Pod, error) {
	a.mu.Lock()
	defer a.mu.Unlock()
	pods := make([]*corev1.Pod, 0, len(a.pods))
	for _, pod := range a.pods {
		pods = append(pods, pod.DeepCopy())
	}
	return pods, nil
}

// A provider registered by its own package is what `--provider acme`
// builds: the daemon (package daemon, from the binary's main) looks it up
// by name and calls it with the node's InitConfig.
func Example() {
	fmt.Println(provider.Names())
	newProvider, err := provider.Get("acme")
	if err != nil {
		fmt.Println(err)
		return
	}
	p, err := newProvider(context.Background(), provider.InitConfig{NodeName: "vk0", OperatingSystem: "linux", InternalIP: "10.0.0.2"})
	if err != nil {
		fmt.Println(err)
		return
	}
	cpu := p.Capacity(context.Background())[corev1.ResourceCPU]
	fmt.Println(p.OperatingSystem(), p.NodeAddresses(context.Background())[0].Address, cpu.String())
	// Output:
	// [acme]
	// linux 10.0.0.2 8
}
