// Package mock is an in-memory provider: pods "run" in the daemon's memory.
// It backs demos and tests, and doubles as a load simulator: pod annotations
// (see the Annotation constants) script how long containers run, their exit
// codes, start failures, restarts and the resource usage they report, and
// inject faults (failing and hanging calls, stops never confirmed). With a
// state directory it keeps its pods across daemon restarts (see state.go).
//
// With devices in its config it is a node.DeviceProvider (see devices.go).
//
// It implements every capability of the kubelet API: logs (deterministic
// lines, one per log interval, with follow), exec (a small built-in command
// set, see RunInContainer), attach, port-forward (an echo server on every
// declared container port) and stats.
package mock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/intern"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/stage"
	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/usage"
)

// Provider is the mock provider. Create it with New.
type Provider struct {
	// NodeBasics answers NodeAddresses, NodeDaemonEndpoints and
	// OperatingSystem from the init config.
	provider.NodeBasics
	nodeName  string
	domain    string
	capacity  corev1.ResourceList
	startedAt time.Time
	faults    *faults
	// events records on the node's pods what the mock refuses them.
	events podEvents
	// copies is what the node's containers may hold of files copied
	// into them.
	copies *copyBudget
	// state, if set, keeps the pods across restarts.
	state *stateDir
	// clock is real but while pods kept in state are replayed.
	clock clock

	// mu guards the pods and serialises notifications, so the controller
	// sees each pod's statuses in order.
	mu     sync.Mutex
	pods   map[string]*podState
	notify func(*corev1.Pod)
	nextIP uint32
	// volumes are the files of the pods' volumes, from SetPodVolumes.
	volumes map[string]*podVolumes
	// retiredCPU is the CPU time, in core-nanoseconds, of deleted pods,
	// which the node's cumulative figure keeps.
	retiredCPU uint64
	// self samples the process's own usage for the node's figures.
	self *processUsage
	// devices are the node's devices, nil without any; prepared are the
	// devices of pods about to be created (see devices.go).
	devices  *deviceSet
	prepared map[string]preparedDevices
	// runtime is what the simulated runtime gives pods.
	runtime node.RuntimeFeatures
	// interner shares the values the pods repeat: the daemon's, so the
	// mock's records hold the informer cache's instances.
	interner *intern.Interner

	// stages are kwok's Stages from --stage-config, and with
	// --watch-stages the cluster's (stagewatch.go), nil without (see
	// stages.go); rnd is their chance. Both are guarded by mu.
	stages *stage.Set
	rnd    *rand.Rand
	// usage is kwok's ResourceUsage and ClusterResourceUsage objects from
	// the stage files (and the cluster), nil without, guarded by mu;
	// usageNode the node as their expressions see it (see usage.go).
	usage     *usage.Set
	usageNode map[string]any
	// nodeStages run the node's stages (nodestages.go).
	nodeStages *nodeStages
	// kube is the API client stages patch and delete with; ctx is the
	// provider's life.
	kube kubernetes.Interface
	ctx  context.Context
}

var (
	_ node.Provider                = (*Provider)(nil)
	_ node.LogsProvider            = (*Provider)(nil)
	_ node.ExecProvider            = (*Provider)(nil)
	_ node.AttachProvider          = (*Provider)(nil)
	_ node.PortForwardProvider     = (*Provider)(nil)
	_ node.StatsProvider           = (*Provider)(nil)
	_ node.PodVolumeHandler        = (*Provider)(nil)
	_ node.PodIPAssigner           = (*Provider)(nil)
	_ node.PodResizer              = (*Provider)(nil)
	_ node.NodeProvider            = (*Provider)(nil)
	_ node.NodeStatusSimulator     = (*Provider)(nil)
	_ node.RuntimeFeaturesDeclarer = (*Provider)(nil)
)

// New builds a mock provider from the init config. The config file, if any,
// sets the node's capacity, a state directory and faults (see loadConfig);
// the pods kept in the state directory are running again when it returns.
func New(ctx context.Context, cfg provider.InitConfig) (node.Provider, error) {
	conf, err := loadConfig(cfg.ConfigPath, cfg.NodeName)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	events := podEvents{recorder: cfg.EventRecorder}
	p := &Provider{
		nodeName:   cfg.NodeName,
		NodeBasics: provider.NodeBasicsFrom(cfg),
		domain:     cfg.ClusterDomain,
		capacity:   conf.capacity,
		startedAt:  now,
		faults:     newFaults(cfg.NodeName, conf.faults, cfg.PodSyncWorkers, events),
		events:     events,
		copies:     &copyBudget{nodeName: cfg.NodeName, max: conf.copiedBytes},
		clock:      realClock{},
		self:       newProcessUsage(now),
		interner:   cfg.Interner,
		rnd:        newRand(),
		kube:       cfg.KubeClient,
		ctx:        ctx,
		devices:    conf.devices,
		runtime:    conf.runtime,
	}
	env := stageEnv(cfg, now, p.stagedIPs)
	if p.stages, err = loadStages(cfg, env); err != nil {
		return nil, err
	}
	if p.usage, err = loadUsage(ctx, p.stages.Foreign()); err != nil {
		return nil, err
	}
	if p.usage != nil || cfg.WatchStages {
		p.usageNode = usageNode(cfg, p.capacity, now)
	}
	p.nodeStages = newNodeStages(p, cfg)
	if cfg.WatchStages {
		if err := watchClusterObjects(ctx, p, cfg, env, p.stages); err != nil {
			return nil, err
		}
	}
	if p.interner == nil {
		p.interner = intern.New()
	}
	if conf.stateDir != "" {
		if p.state, err = openStateDir(p, conf.stateDir); err != nil {
			return nil, fmt.Errorf("provider config %s: node %q: %w", cfg.ConfigPath, cfg.NodeName, err)
		}
	}
	if p.devices != nil {
		return withDevices{p}, nil
	}
	return p, nil
}

func podKey(namespace, name string) string { return namespace + "/" + name }

// NotifyPods implements node.PodNotifier.
func (p *Provider) NotifyPods(_ context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.notify = f
}

// changed reports a pod's new status; p.mu must be held.
func (p *Provider) changed(ps *podState) {
	if p.notify != nil {
		p.notify(ps.notification())
	}
}

// CreatePod starts running the pod as its annotations script it.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	if handled, err := p.injectFaults(ctx, callCreatePod, pod); handled {
		if errdefs.IsInvalidInput(err) {
			p.forgetVolumes(pod)
		}
		return err
	}
	scripts, err := parseScripts(pod)
	if err != nil {
		// The pod is rejected for good: its volumes' Secret data and
		// tokens have no reader.
		p.forgetVolumes(pod)
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	key := podKey(pod.Namespace, pod.Name)
	if old, ok := p.pods[key]; ok {
		old.stopTimers()
		old.releaseFiles()
	}
	ps := newPodState(p, pod, scripts, p.podIPs(pod))
	p.takePrepared(ps)
	put(&p.pods, key, ps)
	log.G(ctx).Debug("mock: pod created")
	if p.staged(pod) {
		if err := p.startStaged(ps, pod); err != nil {
			delete(p.pods, key)
			return err
		}
	} else {
		ps.begin()
	}
	p.changed(ps)
	p.persist(ctx, p.state.created(ps))
	return nil
}

// persist reports a state directory write that failed: the pod runs, but
// would not survive a restart.
func (p *Provider) persist(ctx context.Context, err error) {
	if err != nil {
		log.G(ctx).WithError(err).Error("mock: writing the state directory")
	}
}

// UpdatePod takes the pod's new spec; a container whose image changed is
// restarted with it, as the kubelet does.
func (p *Provider) UpdatePod(ctx context.Context, pod *corev1.Pod) error {
	if handled, err := p.injectFaults(ctx, callUpdatePod, pod); handled {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, ok := p.pods[podKey(pod.Namespace, pod.Name)]
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not in the mock provider", pod.Namespace, pod.Name)
	}
	ps.during(p.clock.Now(), func() {
		if health := ps.pod.annotations[AnnotationUnhealthyDevices]; ps.update(pod) || health != ps.pod.annotations[AnnotationUnhealthyDevices] {
			p.changed(ps)
		}
		p.persist(ctx, p.state.updated(ps))
	})
	ps.refreshUsage(pod)
	if ps.staged != nil {
		p.updateStaged(ps, pod)
	}
	return nil
}

// DeletePod stops the pod's containers, reports its terminal status and
// forgets it.
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	if handled, err := p.injectFaults(ctx, callDeletePod, pod); handled {
		return err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgetVolumesLocked(pod)
	key := podKey(pod.Namespace, pod.Name)
	if d, ok := p.prepared[key]; ok && d.uid == pod.UID {
		delete(p.prepared, key)
	}
	ps, ok := p.pods[key]
	if !ok {
		return errdefs.NotFoundf("pod %s/%s is not in the mock provider", pod.Namespace, pod.Name)
	}
	if ps.staged != nil {
		// Its stages say when it is gone.
		p.deleteStaged(ps, pod)
		return nil
	}
	p.finishPod(ctx, ps)
	return nil
}

// finishPod stops the pod's containers, reports its terminal status and
// forgets it; p.mu must be held.
func (p *Provider) finishPod(ctx context.Context, ps *podState) {
	if ps.staged != nil {
		// From here its containers' states make its status.
		ps.staged.stop()
		ps.staged = nil
	}
	ps.kill()
	p.retiredCPU += ps.cpuTime(time.Now())
	ps.releaseFiles()
	delete(p.pods, podKey(ps.pod.namespace, ps.pod.name))
	p.changed(ps)
	p.persist(ctx, p.state.deleted(ps))
}

// GetPod returns a copy of the pod with its current status.
func (p *Provider) GetPod(ctx context.Context, namespace, name string) (*corev1.Pod, error) {
	if handled, err := p.injectFaultsByName(ctx, callGetPod, namespace, name); handled {
		return nil, err
	}
	return p.getPod(namespace, name)
}

func (p *Provider) getPod(namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	ps, ok := p.pods[podKey(namespace, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not in the mock provider", namespace, name)
	}
	return ps.snapshot(), nil
}

// GetPodStatus returns a copy of the pod's current status.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	if handled, err := p.injectFaultsByName(ctx, callGetPodStatus, namespace, name); handled {
		return nil, err
	}
	pod, err := p.getPod(namespace, name)
	if err != nil {
		return nil, err
	}
	return &pod.Status, nil
}

// GetPods returns copies of all pods.
func (p *Provider) GetPods(ctx context.Context) ([]*corev1.Pod, error) {
	if handled, err := p.injectNodeFaults(ctx, callGetPods); handled {
		return nil, err
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	out := make([]*corev1.Pod, 0, len(p.pods))
	for _, ps := range p.pods {
		out = append(out, ps.snapshot())
	}
	return out, nil
}

// Capacity implements node.Provider.
func (p *Provider) Capacity(context.Context) corev1.ResourceList { return p.capacity.DeepCopy() }

// NodeConditions reports the node Ready with no pressure.
func (p *Provider) NodeConditions(context.Context) []corev1.NodeCondition {
	return provider.HealthyConditions(p.startedAt, "mock provider")
}

// AssignPodIPs implements node.PodIPAssigner: the pod takes the IPs the
// node's pod CIDRs offer, or else one of the mock's own.
func (p *Provider) AssignPodIPs(_ context.Context, pod *corev1.Pod) ([]string, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.podIPs(pod), nil
}

// podIPs are the IPs the pod comes with (status.podIPs, as the pod
// controller decided them), or else one of the mock's own; p.mu must be
// held.
func (p *Provider) podIPs(pod *corev1.Pod) []string {
	var ips []string
	for _, ip := range pod.Status.PodIPs {
		ips = append(ips, ip.IP)
	}
	if len(ips) == 0 && pod.Status.PodIP != "" {
		ips = []string{pod.Status.PodIP}
	}
	if len(ips) == 0 {
		ips = []string{p.allocateIP()}
	}
	return ips
}

// allocateIP hands out pod IPs from 10.244.0.0/16; p.mu must be held.
func (p *Provider) allocateIP() string {
	p.nextIP++
	n := p.nextIP%65534 + 1
	return netip.AddrFrom4([4]byte{10, 244, byte(n >> 8), byte(n)}).String()
}

// lookup returns the running state of a container; p.mu must be held.
func (p *Provider) lookup(namespace, pod, container string) (*podState, *containerState, error) {
	ps, ok := p.pods[podKey(namespace, pod)]
	if !ok {
		return nil, nil, errdefs.NotFoundf("pod %s/%s not found", namespace, pod)
	}
	c := ps.container(container)
	if c == nil {
		return nil, nil, errdefs.NotFoundf("container %q not found in pod %s/%s", container, namespace, pod)
	}
	return ps, c, nil
}

// errNotRunning is returned for exec and attach into a container that is not running.
func errNotRunning(c *containerState) error {
	return errdefs.InvalidInputf("container %q is not running", c.spec.name)
}

// podInfo is what the mock keeps of a pod's object: a small part of a
// corev1.Pod, since it may simulate tens of thousands of them.
type podInfo struct {
	namespace, name string
	uid             types.UID
	labels          map[string]string
	annotations     map[string]string
	created         metav1.Time
	nodeName        string
	restartPolicy   corev1.RestartPolicy
}

// containerSpec is what the mock keeps of a container.
type containerSpec struct {
	name, image   string
	command, args []string
	env           []corev1.EnvVar
	ports         []corev1.ContainerPort
	mounts        []corev1.VolumeMount
	// resources are the resources the container runs with.
	resources corev1.ResourceRequirements
	// restartPolicy is set on sidecars (init containers that keep
	// running), and on containers with their own restart rules.
	restartPolicy *corev1.ContainerRestartPolicy
	restartRules  []corev1.ContainerRestartRule
}

// infoOf and specOf keep in's instances of the maps a pod's copy repeats,
// which are the informer's when the daemon shares its Interner, so the
// mock's record of a pod adds little to the informer's: the mock never
// changes them in place.
func infoOf(in *intern.Interner, pod *corev1.Pod) *podInfo {
	info := &podInfo{
		namespace: pod.Namespace, name: pod.Name, uid: pod.UID,
		labels: in.StringMap(pod.Labels), annotations: in.StringMap(pod.Annotations), created: pod.CreationTimestamp,
		nodeName: pod.Spec.NodeName, restartPolicy: pod.Spec.RestartPolicy,
	}
	return info
}

func specOf(in *intern.Interner, c corev1.Container) containerSpec {
	in.Requirements(&c.Resources)
	return containerSpec{name: c.Name, image: c.Image, command: c.Command, args: c.Args, env: in.EnvVars(c.Env), ports: c.Ports, mounts: c.VolumeMounts, resources: c.Resources, restartPolicy: c.RestartPolicy, restartRules: c.RestartPolicyRules}
}

func (c containerSpec) container() corev1.Container {
	return corev1.Container{Name: c.name, Image: c.image, Command: c.command, Args: c.args, Env: c.env, Ports: c.ports, VolumeMounts: c.mounts, Resources: c.resources, RestartPolicy: c.restartPolicy, RestartPolicyRules: c.restartRules}
}

// String names the provider in logs.
func (p *Provider) String() string { return fmt.Sprintf("mock provider for node %s", p.nodeName) }

// put sets m[k] to v, making m at its first entry: the maps of a node's
// pods stay nil while it has none, and a process runs a thousand idle
// nodes.
func put[K comparable, V any](m *map[K]V, k K, v V) {
	if *m == nil {
		*m = map[K]V{}
	}
	(*m)[k] = v
}
