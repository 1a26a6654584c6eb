// Package brokenproviders holds providers for testing the e2e suite itself:
// each wraps the mock and breaks one rule of the provider contract, so a
// test can show the suite fails for it, naming the rule; Polled keeps the
// contract, so the same harness shows the suite passes. They register with
// the provider registry, so a daemon built into the test binary runs them
// with --provider <name>.
package brokenproviders

import (
	"context"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

// The names the fixtures register under.
const (
	// NeverStops: DeletePod returns nil and does nothing; the pod keeps
	// running and is never reported terminal.
	NeverStops = "broken-never-stops"
	// IgnoresGrace: DeletePod stops the pod IgnoredGraceStop later,
	// whatever the pod's grace period.
	IgnoresGrace = "broken-ignores-grace"
	// SharedStatus: NotifyPods hands the pod controller one object per
	// pod and later changes it in place instead of reporting anew.
	SharedStatus = "broken-shared-status"
	// Polled: the mock without PodNotifier, its statuses polled; it keeps
	// the contract.
	Polled = "polled-mock"
	// CannotPrepare: the mock with two devices, published, that
	// PrepareDevices always refuses.
	CannotPrepare = "broken-cannot-prepare"
)

// IgnoredGraceStop is when IgnoresGrace stops a deleted pod: longer than
// the suite's grace period and slack.
const IgnoredGraceStop = 40 * time.Second

// Register makes the fixtures available to the daemon by name.
func Register() {
	wrap := func(name string, f func(*mock.Provider) node.Provider) {
		provider.Register(name, func(ctx context.Context, cfg provider.InitConfig) (node.Provider, error) {
			p, err := mock.New(ctx, cfg)
			if err != nil {
				return nil, err
			}
			return f(p.(*mock.Provider)), nil
		})
	}
	wrap(NeverStops, func(m *mock.Provider) node.Provider { return neverStops{m} })
	wrap(IgnoresGrace, func(m *mock.Provider) node.Provider {
		return &ignoresGrace{Provider: m, stopping: map[types.UID]bool{}}
	})
	wrap(SharedStatus, func(m *mock.Provider) node.Provider {
		return &sharedStatus{Provider: m, objects: map[types.UID]*corev1.Pod{}}
	})
	provider.Register(CannotPrepare, newCannotPrepare)
	wrap(Polled, func(m *mock.Provider) node.Provider {
		return polled{Provider: m, LogsProvider: m, ExecProvider: m, AttachProvider: m, PortForwardProvider: m, StatsProvider: m, PodIPAssigner: m, PodVolumeHandler: m}
	})
}

// neverStops breaks DeletePod: the pod is not stopped, not reported
// terminal, and stays in GetPods.
type neverStops struct{ *mock.Provider }

func (neverStops) DeletePod(context.Context, *corev1.Pod) error { return nil }

// ignoresGrace stops a deleted pod on a schedule of its own, as a backend
// with a fixed stop timeout does.
type ignoresGrace struct {
	*mock.Provider
	mu       sync.Mutex
	stopping map[types.UID]bool
}

func (p *ignoresGrace) DeletePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if !p.stopping[pod.UID] {
		p.stopping[pod.UID] = true
		pod = pod.DeepCopy()
		time.AfterFunc(IgnoredGraceStop, func() { _ = p.Provider.DeletePod(context.Background(), pod) })
	}
	return nil
}

// sharedStatus hands the pod controller one object per pod, once, and
// from then on changes that object in place instead of reporting again, as
// if the controller read the provider's own objects. The pod controller
// copies what it is handed (the contract says the object is the caller's),
// so the later statuses never reach it. Containers start sharedStartDelay
// late, so the one status handed over is Pending.
type sharedStatus struct {
	*mock.Provider
	mu      sync.Mutex
	objects map[types.UID]*corev1.Pod
}

func (p *sharedStatus) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	pod = pod.DeepCopy()
	pod.Annotations = maps.Clone(pod.Annotations)
	if pod.Annotations == nil {
		pod.Annotations = map[string]string{}
	}
	pod.Annotations[mock.AnnotationStartDelay] = sharedStartDelay.String()
	return p.Provider.CreatePod(ctx, pod)
}

func (p *sharedStatus) NotifyPods(ctx context.Context, f func(*corev1.Pod)) {
	p.Provider.NotifyPods(ctx, func(pod *corev1.Pod) {
		p.mu.Lock()
		shared, handed := p.objects[pod.UID]
		if handed {
			*shared = *pod.DeepCopy()
		} else {
			shared = pod.DeepCopy()
			p.objects[pod.UID] = shared
		}
		p.mu.Unlock()
		if !handed {
			f(shared)
		}
	})
}

// sharedStartDelay is how long sharedStatus keeps a pod Pending.
const sharedStartDelay = 3 * time.Second

// polled is the mock with every capability but PodNotifier.
type polled struct {
	node.Provider
	node.LogsProvider
	node.ExecProvider
	node.AttachProvider
	node.PortForwardProvider
	node.StatsProvider
	node.PodIPAssigner
	node.PodVolumeHandler
}

// cannotPrepare is the mock with two devices (published as the node's
// ResourceSlice) whose PrepareDevices always refuses them, as a backend
// that lost its GPUs would.
type cannotPrepare struct {
	node.Provider
	node.PodNotifier
	devices node.DeviceProvider
}

func (p cannotPrepare) NotifyDevices(ctx context.Context, f func([]node.DeviceDriver)) {
	p.devices.NotifyDevices(ctx, f)
}

func (cannotPrepare) PrepareDevices(context.Context, *corev1.Pod, node.PodDevices) error {
	return errdefs.InvalidInput("no device can be prepared")
}

// newCannotPrepare is the mock of a node with two devices, made cannotPrepare.
func newCannotPrepare(ctx context.Context, cfg provider.InitConfig) (node.Provider, error) {
	path := filepath.Join(os.TempDir(), "vk-"+cfg.NodeName+"-devices.json")
	if err := os.WriteFile(path, []byte(fmt.Sprintf(`{%q: {"devices": [{"name": "gpu", "count": 2}]}}`, cfg.NodeName)), 0o600); err != nil {
		return nil, err
	}
	defer os.Remove(path)
	cfg.ConfigPath = path
	p, err := mock.New(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return cannotPrepare{Provider: p, PodNotifier: p.(node.PodNotifier), devices: p.(node.DeviceProvider)}, nil
}
