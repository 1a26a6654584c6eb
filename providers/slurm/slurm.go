// Package slurm is a provider that runs a virtual node's pods as Slurm
// batch jobs: one job per pod, each container a process under bubblewrap
// inside it (init containers first, in order), with the pod's volumes
// bind-mounted from a per-pod directory in a work directory the compute
// nodes share (see package internal/sandbox for the job's side).
//
// State is pushed: one squeue per poll interval for the node's jobs (by
// name, six fields each, see listNamed), diffed against what was last
// reported, changes sent through NotifyPods. The daemon records each
// pod's job ID, so a restarted daemon adopts its running jobs and never
// submits a pod twice.
package slurm

import (
	"context"
	_ "embed"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/wait"
	k8srecord "k8s.io/client-go/tools/record"

	"github.com/vkubelet/virtual-kubelet/node"
	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/log"
	"github.com/vkubelet/virtual-kubelet/node/volume"
	"github.com/vkubelet/virtual-kubelet/provider"
)

//go:embed job.sh
var jobScript []byte

// AnnotationSbatchPrefix starts the pod annotations that pass an extra
// sbatch option: slurm.virtual-kubelet.io/sbatch-constraint: "avx512"
// becomes --constraint=avx512. Only the options in SbatchOptions are taken,
// and only those the pod's tenant allows (see Allow).
const AnnotationSbatchPrefix = "slurm.virtual-kubelet.io/sbatch-"

// Provider runs pods as Slurm jobs. Create it with New.
type Provider struct {
	// NodeBasics answers NodeAddresses, NodeDaemonEndpoints and
	// OperatingSystem from the init config.
	provider.NodeBasics
	cfg *Config
	cli *slurmCLI
	// scancel signals and cancels jobs, many in one call.
	scancel *scanceller
	// tenancy decides each pod's tenant, once.
	tenancy  *tenancy
	nodeName string
	jobName  string
	capacity corev1.ResourceList
	started  time.Time

	mu   sync.Mutex
	pods map[string]*podJob // by namespace/name
	// unsure holds the pods whose last sbatch failed: their job may exist.
	unsure map[types.UID]bool
	// notify is the controller's callback; calls are serialised by mu.
	notify func(*corev1.Pod)
	// hostPaths and hidden are the pod directory's files of the same
	// names, the same for every pod: made once.
	hostPaths, hidden []byte
	// ignored are the jobs, by ID, that carry this node's job name but are
	// no pod's: forged ones, logged once each, and those of forgotten
	// pods, which Slurm lists for a while after they ended.
	ignored map[string]bool
	// events records Events on the pods (a held job); nil in a plugin
	// process.
	events k8srecord.EventRecorder
	// devices are the GRES published as DRA devices; nil when the Slurm
	// nodes have none of those the config names.
	devices *nodeDevices
	// forgotten are the directories of pods forgotten under mu, removed
	// once it is released (removeForgotten): a pod's dozens of files take
	// milliseconds to remove, hundreds of pods' would hold off every
	// other call.
	forgotten []string
}

// podJob is one pod and its job.
type podJob struct {
	pod    *corev1.Pod
	tenant *tenant
	dir    string
	jobID  string // empty while sbatch runs
	// submitted is when sbatch returned: a listing started before it may
	// not show the job.
	submitted time.Time
	job       *job // as squeue last listed it; nil when it no longer does
	// listed is set once a listing started after the submission: from
	// then on a job missing from squeue has ended.
	listed bool
	// deleting is set once DeletePod asked the job to stop.
	deleting bool
	// pastDeadline is set once the job ran past the pod's
	// activeDeadlineSeconds and the provider cancelled it.
	pastDeadline bool
	// evicted says why the pod was evicted (an emptyDir past its
	// sizeLimit); empty while it was not.
	evicted string
	status  corev1.PodStatus
	// reads counts the status reads begun (beginRead), applied the
	// last one applied: a read that finishes after a later one is stale.
	reads, applied uint64
}

var (
	_ node.Provider            = (*Provider)(nil)
	_ node.LogsProvider        = (*Provider)(nil)
	_ node.ExecProvider        = (*Provider)(nil)
	_ node.AttachProvider      = (*Provider)(nil)
	_ node.PortForwardProvider = (*Provider)(nil)
	_ node.PodVolumeHandler    = (*Provider)(nil)
	_ node.PodNotifier         = (*Provider)(nil)
	_ node.NodeProvider        = (*Provider)(nil)
)

// New builds the provider from its config file (see Config), installs the
// job script in the work directory and adopts the node's jobs that are
// still in Slurm.
func New(ctx context.Context, ic provider.InitConfig) (node.Provider, error) {
	cfg, err := LoadConfig(ic.ConfigPath)
	if err != nil {
		return nil, err
	}
	if err := cfg.checkPrivileges(os.Geteuid()); err != nil {
		return nil, fmt.Errorf("provider config %s: %w", ic.ConfigPath, err)
	}
	p := &Provider{
		NodeBasics: provider.NodeBasicsFrom(ic),
		cfg:        cfg,
		cli:        newCLI(cfg),
		nodeName:   ic.NodeName,
		jobName:    "vk_" + ic.NodeName,
		started:    time.Now(),
		pods:       map[string]*podJob{},
		unsure:     map[types.UID]bool{},
		ignored:    map[string]bool{},
		events:     ic.EventRecorder,
	}
	p.scancel = newScanceller(p.cli)
	p.hostPaths, p.hidden = nulList(cfg.HostPaths), nulList(p.hiddenPaths())
	if err := p.install(); err != nil {
		return nil, fmt.Errorf("provider config %s: %w", ic.ConfigPath, err)
	}
	if p.capacity = cfg.capacity(); p.capacity == nil {
		if p.capacity, err = p.sinfoCapacity(ctx); err != nil {
			return nil, fmt.Errorf("node capacity from sinfo (or set capacity in %s): %w", ic.ConfigPath, err)
		}
	}
	if p.tenancy, err = newTenancy(ctx, cfg, ic.KubeClient); err != nil {
		return nil, fmt.Errorf("provider config %s: %w", ic.ConfigPath, err)
	}
	if err := p.adopt(ctx); err != nil {
		return nil, fmt.Errorf("adopting the node's jobs: %w", err)
	}
	if len(cfg.Devices) > 0 {
		if p.devices, err = p.discoverDevices(ctx); err != nil {
			return nil, fmt.Errorf("devices from the Slurm nodes' GRES (or set devices: [] in %s): %w", ic.ConfigPath, err)
		}
	}
	if p.devices != nil {
		return withDevices{p}, nil
	}
	return p, nil
}

// install lays out the work directory: tenants may pass through it
// (0711) but list or change nothing in it; the job script and the
// container launcher (see findLauncher) are the daemon's; the state
// directory is the daemon's alone.
func (p *Provider) install() error {
	for _, d := range []struct {
		path string
		mode os.FileMode
	}{{p.cfg.WorkDir, 0o711}, {filepath.Join(p.cfg.WorkDir, ".bin"), 0o755}, {p.cfg.StateDir, 0o700}} {
		if err := os.MkdirAll(d.path, d.mode); err != nil {
			return fmt.Errorf("workDir: %v", err)
		}
		if err := os.Chmod(d.path, d.mode); err != nil {
			return fmt.Errorf("workDir: %v", err)
		}
	}
	if err := writeAtomic(p.scriptPath(), jobScript, 0o755); err != nil {
		return fmt.Errorf("workDir: %v", err)
	}
	launcher, err := findLauncher(p.cfg.Launcher)
	if err != nil {
		return err
	}
	if err := copyExecutable(launcher, p.launcherPath()); err != nil {
		return fmt.Errorf("launcher: %v", err)
	}
	return nil
}

// LauncherName is the job's program: every job's script becomes it (see
// package internal/sandbox).
const LauncherName = "virtual-kubelet-slurm-container"

// findLauncher is the launcher the config names, or else the one beside
// the daemon's executable, or else the one on PATH.
func findLauncher(configured string) (string, error) {
	if configured != "" {
		return configured, nil
	}
	if self, err := os.Executable(); err == nil {
		beside := filepath.Join(filepath.Dir(self), LauncherName)
		if _, err := os.Stat(beside); err == nil {
			return beside, nil
		}
	}
	path, err := exec.LookPath(LauncherName)
	if err != nil {
		return "", fmt.Errorf("launcher: %s is neither beside the daemon's executable nor on PATH (make build builds both; or set launcher: in the config)", LauncherName)
	}
	return path, nil
}

func (p *Provider) scriptPath() string { return filepath.Join(p.cfg.WorkDir, "job.sh") }

// launcherPath is where jobs find the container launcher.
func (p *Provider) launcherPath() string {
	return filepath.Join(p.cfg.WorkDir, ".bin", LauncherName)
}

func podKey(namespace, name string) string { return namespace + "/" + name }

// jobComment names the pod a job runs; adoption reads it back.
func jobComment(uid types.UID) string { return "vk-pod:" + string(uid) }

// sinfoCapacity sums the capacity of the partition's nodes.
func (p *Provider) sinfoCapacity(ctx context.Context) (corev1.ResourceList, error) {
	nodes, err := p.cli.sinfo(ctx)
	if err != nil {
		return nil, err
	}
	var cpus, mem int64
	for _, n := range nodes {
		// sinfo's figures are a backend's bytes: nothing negative, nothing
		// that wraps once summed and turned into bytes.
		if n.CPUs < 0 || n.RealMemory < 0 || cpus > math.MaxInt32-n.CPUs || mem > (math.MaxInt64>>20)-n.RealMemory {
			return nil, fmt.Errorf("sinfo --json: node %q reports %d CPUs and %d MiB, which the node's capacity cannot hold", n.Name, n.CPUs, n.RealMemory)
		}
		cpus += n.CPUs
		mem += n.RealMemory
	}
	return corev1.ResourceList{
		corev1.ResourceCPU:    *resource.NewQuantity(cpus, resource.DecimalSI),
		corev1.ResourceMemory: *resource.NewQuantity(mem<<20, resource.BinarySI),
		corev1.ResourcePods:   *resource.NewQuantity(1000, resource.DecimalSI),
	}, nil
}

// adopt takes over the jobs of this node that Slurm still lists, from the
// records only the daemon writes (see record): a job is the pod's only if
// its ID is the one sbatch returned for the pod and it belongs to the
// pod's tenant.
func (p *Provider) adopt(ctx context.Context) error {
	recs, err := p.records(ctx)
	if err != nil || len(recs) == 0 {
		return err
	}
	jobs, err := p.cli.squeue(ctx)
	if err != nil {
		return err
	}
	byID := map[string]*job{}
	for i := range jobs {
		byID[jobs[i].jobID()] = &jobs[i]
	}
	for _, r := range recs {
		pod := r.Pod
		key := podKey(pod.Namespace, pod.Name)
		t, err := p.tenancy.adopt(ctx, pod, r.TenantUID)
		if err != nil {
			log.G(ctx).Warnf("pod %s: its job %s is not adopted: %v", key, r.JobID, err)
			continue
		}
		j := byID[r.JobID]
		if j == nil {
			log.G(ctx).Infof("pod %s: its job %s is no longer in Slurm", key, r.JobID)
			p.removeRecord(pod.UID)
			p.tenancy.release(pod.UID)
			continue
		}
		if !p.owns(j, t, pod.UID) {
			log.G(ctx).Warnf("pod %s: job %s is not the pod's (name %q, user %d, comment %q): not adopted", key, r.JobID, j.Name, j.UserID, j.Comment)
			p.tenancy.release(pod.UID)
			continue
		}
		pj := &podJob{pod: pod, tenant: t, dir: p.podDir(pod), jobID: r.JobID, job: j, listed: true}
		pj.status = podStatus(pod, p.view(pj))
		p.pods[key] = pj
		log.G(ctx).Infof("adopted job %d of pod %s", j.ID, key)
	}
	return nil
}

// owns reports whether a job Slurm lists is one this node submitted for
// the pod: its name and comment (when the listing says it) are the node's
// and the pod's, and it belongs to the pod's tenant. Any Slurm user can
// name a job and write a comment; only the tenant's user (or root) can own
// it. The callers look the job up by the ID sbatch returned, but for a
// submission whose answer was lost.
func (p *Provider) owns(j *job, t *tenant, uid types.UID) bool {
	return j.Name == p.jobName && (j.brief || j.Comment == jobComment(uid)) && j.UserID == t.uid
}

// Capacity implements node.Provider.
func (p *Provider) Capacity(context.Context) corev1.ResourceList { return p.capacity.DeepCopy() }

// NodeConditions implements node.Provider.
func (p *Provider) NodeConditions(context.Context) []corev1.NodeCondition {
	return provider.HealthyConditions(p.started, "slurm provider")
}

// Ping implements node.NodeProvider: the node is Ready while slurmctld
// answers.
func (p *Provider) Ping(ctx context.Context) error {
	_, err := p.cli.run(ctx, nil, "squeue", "--noheader", "--states=RUNNING", "--format=%i", "--name="+p.jobName)
	return err
}

// NotifyNodeStatus implements node.NodeProvider; the node's status does not
// change but through Ping.
func (p *Provider) NotifyNodeStatus(context.Context, func(*corev1.Node)) {}

// SetPodVolumes implements node.PodVolumeHandler: the files go to the pod's
// directory, where its containers' bind mounts see them. A pod of a
// namespace no tenant maps gets nothing written; CreatePod rejects it.
func (p *Provider) SetPodVolumes(_ context.Context, pod *corev1.Pod, contents *volume.Contents) error {
	t, err := p.tenancy.of(pod)
	if errdefs.IsInvalidInput(err) {
		return nil
	}
	if err != nil {
		return err
	}
	return p.writeVolumes(pod, t, contents)
}

// CreatePod submits the pod's job, unless a job for it already exists.
func (p *Provider) CreatePod(ctx context.Context, pod *corev1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	t, err := p.tenancy.of(pod)
	if err != nil {
		return err
	}
	dir := p.podDir(pod)
	init, main, err := p.plan(pod)
	if err != nil {
		p.tenancy.release(pod.UID)
		return err
	}
	args, err := p.sbatchArgs(pod, t, dir)
	if err != nil {
		p.tenancy.release(pod.UID)
		return err
	}
	p.mu.Lock()
	if pj, ok := p.pods[key]; ok && pj.pod.UID == pod.UID {
		p.mu.Unlock()
		return nil
	}
	pj := &podJob{pod: pod.DeepCopy(), tenant: t, dir: dir}
	p.pods[key] = pj
	p.mu.Unlock()

	id, err := p.submit(ctx, pod, t, init, main, args)
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		delete(p.pods, key)
		return err
	}
	p.forgetDevices(pod)
	pj.jobID, pj.submitted = id, time.Now()
	log.G(ctx).Infof("pod %s is job %s", key, id)
	p.report(key, pj)
	return nil
}

// submit writes the pod's directory and submits its job. A failed sbatch
// may still have queued the job (slurmctld took it, the answer was lost):
// the retry looks for it before submitting again.
func (p *Provider) submit(ctx context.Context, pod *corev1.Pod, t *tenant, init, main []containerPlan, args []string) (string, error) {
	p.mu.Lock()
	retry := p.unsure[pod.UID]
	p.mu.Unlock()
	if retry {
		jobs, err := p.cli.squeue(ctx)
		if err != nil {
			return "", err
		}
		for i := range jobs {
			if p.owns(&jobs[i], t, pod.UID) {
				return jobs[i].jobID(), p.saveRecord(pod, t, jobs[i].jobID())
			}
		}
	}
	if err := p.writePodDir(pod, t, init, main); err != nil {
		return "", fmt.Errorf("writing the pod's directory: %w", err)
	}
	id, err := p.cli.sbatch(ctx, t.cred, append(args, p.scriptPath(), p.podDir(pod), p.launcherPath(), p.cfg.Bwrap)...)
	if err == nil {
		err = p.saveRecord(pod, t, id)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if err != nil {
		p.unsure[pod.UID] = true
	} else {
		delete(p.unsure, pod.UID)
	}
	return id, err
}

// sbatchArgs are the options of the pod's job: the tenant's account,
// partition and QOS, the pod's resources and the annotations the tenant
// allows.
func (p *Provider) sbatchArgs(pod *corev1.Pod, t *tenant, dir string) ([]string, error) {
	args := []string{
		"--job-name=" + p.jobName, "--comment=" + jobComment(pod.UID),
		"--output=" + filepath.Join(dir, "job.out"), "--chdir=" + dir,
		"--nodes=1", "--ntasks=1",
	}
	chosen := map[string]bool{}
	for _, k := range sortedKeys(pod.Annotations) {
		name, ok := strings.CutPrefix(k, AnnotationSbatchPrefix)
		if !ok {
			continue
		}
		arg, err := t.option(k, name, pod.Annotations[k])
		if err != nil {
			return nil, err
		}
		args = append(args, arg)
		chosen[name] = true
	}
	for opt, v := range map[string]string{"partition": t.partition, "account": t.account, "qos": t.qos} {
		if v != "" && !chosen[opt] {
			args = append(args, "--"+opt+"="+v)
		}
	}
	cpu, mem := podResources(pod)
	args = append(args, "--cpus-per-task="+strconv.FormatInt(max(1, (cpu.ScaledValue(resource.Milli)+999)/1000), 10))
	if m := mem.Value(); m > 0 {
		args = append(args, "--mem="+strconv.FormatInt((m+(1<<20)-1)>>20, 10)+"M")
	}
	gres, err := p.gresArgs(pod)
	if err != nil {
		return nil, err
	}
	devices, nodelist := p.deviceArgs(pod)
	if gres = append(gres, devices...); len(gres) > 0 {
		// One --gres: sbatch keeps only the last of several.
		args = append(args, "--gres="+strings.Join(gres, ","))
	}
	if nodelist != "" {
		args = append(args, "--nodelist="+nodelist)
	}
	if d := pod.Spec.ActiveDeadlineSeconds; d != nil {
		// The provider cancels the job at the deadline itself (Slurm's
		// limits are whole minutes and checked lazily); the time limit,
		// a minute later, is the backstop should the daemon be down.
		args = append(args, "--time="+strconv.FormatInt(int64(math.Ceil(float64(*d)/60))+1, 10))
	}
	return args, nil
}

// gresArgs turns the pod's extended resources into --gres specs
// (gpu:2), one per GRES, counted as podResources counts CPU; an extended
// resource the node does not map is refused.
func (p *Provider) gresArgs(pod *corev1.Pod) ([]string, error) {
	names := map[string]bool{}
	for _, list := range [][]corev1.Container{pod.Spec.InitContainers, pod.Spec.Containers} {
		for _, c := range list {
			for name := range c.Resources.Limits {
				names[string(name)] = true
			}
			for name := range c.Resources.Requests {
				names[string(name)] = true
			}
		}
	}
	var args []string
	for _, name := range sortedKeys(names) {
		rn := corev1.ResourceName(name)
		if !strings.Contains(name, "/") || strings.HasPrefix(name, "kubernetes.io/") || strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
			continue
		}
		gres, ok := p.cfg.Gres[name]
		if !ok {
			return nil, errdefs.InvalidInputf("resource %s: this Slurm node maps no GRES to it (its config's gres: %s)", name, strings.Join(sortedKeys(p.cfg.Gres), ", "))
		}
		if q := podQuantity(pod, rn); q.Value() > 0 {
			n := q.Value()
			args = append(args, gres+":"+strconv.FormatInt(n, 10))
		}
	}
	return args, nil
}

// podResources is what the pod asks for, as a kubelet counts it: the sum of
// the containers' requests (limits where no request is set), or the
// largest init container's, whichever is larger.
func podResources(pod *corev1.Pod) (cpu, mem resource.Quantity) {
	return podQuantity(pod, corev1.ResourceCPU), podQuantity(pod, corev1.ResourceMemory)
}

// podQuantity is the pod's need of one resource: the sum of the
// containers' requests (limits where no request is set), or the largest
// init container's, whichever is larger.
func podQuantity(pod *corev1.Pod, name corev1.ResourceName) resource.Quantity {
	want := func(c *corev1.Container) resource.Quantity {
		if q, ok := c.Resources.Requests[name]; ok {
			return q
		}
		return c.Resources.Limits[name]
	}
	var sum, initMax resource.Quantity
	for i := range pod.Spec.Containers {
		sum.Add(want(&pod.Spec.Containers[i]))
	}
	for i := range pod.Spec.InitContainers {
		if q := want(&pod.Spec.InitContainers[i]); q.Cmp(initMax) > 0 {
			initMax = q
		}
	}
	if initMax.Cmp(sum) > 0 {
		return initMax
	}
	return sum
}

// UpdatePod keeps the new pod object; a job's spec cannot change.
func (p *Provider) UpdatePod(_ context.Context, pod *corev1.Pod) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	pj, ok := p.pods[podKey(pod.Namespace, pod.Name)]
	if !ok || pj.pod.UID != pod.UID {
		return errdefs.NotFoundf("pod %s/%s is not on this node", pod.Namespace, pod.Name)
	}
	pj.pod = pod.DeepCopy()
	return nil
}

// DeletePod stops the pod's job within its grace period: TERM to the
// containers at once, the job cancelled when the grace has passed. The
// TERMs of pods deleted together go to Slurm in one scancel (see
// scanceller).
func (p *Provider) DeletePod(ctx context.Context, pod *corev1.Pod) error {
	key := podKey(pod.Namespace, pod.Name)
	p.forgetDevices(pod)
	p.mu.Lock()
	pj, ok := p.pods[key]
	if !ok || pj.pod.UID != pod.UID {
		p.mu.Unlock()
		// Its volumes may have been written, its job never submitted.
		p.tenancy.release(pod.UID)
		return errdefs.NotFoundf("pod %s is not on this node", key)
	}
	id, cred, ended := pj.jobID, pj.tenant.cred, pj.status.Phase == corev1.PodSucceeded || pj.status.Phase == corev1.PodFailed
	first := !pj.deleting
	pj.deleting = true
	if ended || id == "" {
		p.forget(key, pj)
		p.mu.Unlock()
		p.removeForgotten()
		return nil
	}
	pending := pj.job == nil || pj.job.State == statePending
	p.mu.Unlock()
	if !first {
		return nil
	}
	grace := int64(30)
	if pod.DeletionGracePeriodSeconds != nil {
		grace = *pod.DeletionGracePeriodSeconds
	} else if pod.Spec.TerminationGracePeriodSeconds != nil {
		grace = *pod.Spec.TerminationGracePeriodSeconds
	}
	kind := stopTerm
	if grace <= 0 || pending {
		kind = stopCancel
	}
	if err := p.scancel.stop(ctx, cred, kind, id); err != nil {
		// Not stopped: the controller's retry asks again.
		p.mu.Lock()
		pj.deleting = false
		p.mu.Unlock()
		return err
	}
	if kind == stopCancel {
		return nil
	}
	time.AfterFunc(time.Duration(grace)*time.Second, func() {
		p.mu.Lock()
		still := p.pods[key] == pj
		p.mu.Unlock()
		if !still {
			// Its job ended within the grace period and the pod is
			// forgotten: nothing to cancel, and a scancel per deleted pod
			// costs Slurm a request.
			return
		}
		if err := p.scancel.stop(context.Background(), cred, stopCancel, id); err != nil {
			log.G(ctx).WithError(err).Warnf("cancelling job %s after the grace period", id)
		}
	})
	return nil
}

// forget reports the pod's final status and drops it and its record; its
// directory goes with the next removeForgotten. p.mu must be held.
func (p *Provider) forget(key string, pj *podJob) {
	if p.notify != nil {
		p.notify(p.notification(pj))
	}
	delete(p.pods, key)
	if pj.jobID != "" {
		p.ignored[pj.jobID] = true
	}
	p.removeRecord(pj.pod.UID)
	p.tenancy.release(pj.pod.UID)
	p.forgotten = append(p.forgotten, pj.dir)
}

// removeForgotten removes the directories of the pods forgotten so far;
// p.mu must not be held. A directory is named by its pod's UID, never
// used again, so removing it late races with nothing.
func (p *Provider) removeForgotten() {
	p.mu.Lock()
	dirs := p.forgotten
	p.forgotten = nil
	p.mu.Unlock()
	for _, dir := range dirs {
		_ = os.RemoveAll(dir)
	}
}

// GetPod implements node.PodLifecycleHandler.
func (p *Provider) GetPod(_ context.Context, namespace, name string) (*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pj, ok := p.pods[podKey(namespace, name)]
	if !ok {
		return nil, errdefs.NotFoundf("pod %s/%s is not on this node", namespace, name)
	}
	return p.notification(pj), nil
}

// GetPodStatus implements node.PodLifecycleHandler.
func (p *Provider) GetPodStatus(ctx context.Context, namespace, name string) (*corev1.PodStatus, error) {
	return provider.PodStatusFrom(ctx, p.GetPod, namespace, name)
}

// GetPods implements node.PodLifecycleHandler.
func (p *Provider) GetPods(context.Context) ([]*corev1.Pod, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	pods := make([]*corev1.Pod, 0, len(p.pods))
	for _, pj := range p.pods {
		pods = append(pods, p.notification(pj))
	}
	return pods, nil
}

// notification is the pod with its current status; p.mu must be held.
func (p *Provider) notification(pj *podJob) *corev1.Pod {
	pod := pj.pod.DeepCopy()
	pod.Status = *pj.status.DeepCopy()
	return pod
}

// NotifyPods implements node.PodNotifier: it starts the loop that lists the
// node's jobs once per poll interval and reports what changed.
func (p *Provider) NotifyPods(ctx context.Context, f func(*corev1.Pod)) {
	p.mu.Lock()
	p.notify = f
	p.mu.Unlock()
	go func() {
		t := time.NewTicker(p.cfg.poll)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
				if err := p.poll(ctx); err != nil && ctx.Err() == nil {
					log.G(ctx).WithError(err).Warn("listing the node's jobs")
				}
			}
		}
	}()
	go wait.Until(func() { p.evictOverfullEmptyDirs(ctx) }, evictionInterval, ctx.Done())
	go wait.Until(p.reportFromFiles, min(p.cfg.poll, filesInterval), ctx.Done())
}

// filesInterval is how often, between two listings, the files are read
// of the pods whose next change shows there first (watchedByFiles).
const filesInterval = 200 * time.Millisecond

// reportFromFiles reports the pods whose status their files change before
// the next listing shows it, which takes seconds while slurmctld is busy
// with a burst of starting or ending jobs (watchedByFiles). The job is as
// the last listing saw it; a pod being deleted is forgotten once a
// listing shows its job ended.
func (p *Provider) reportFromFiles() {
	var reads []statusRead
	p.mu.Lock()
	for key, pj := range p.pods {
		if pj.watchedByFiles() {
			reads = append(reads, p.beginRead(key, pj, false))
		}
	}
	p.mu.Unlock()
	p.finishReads(reads)
}

// watchedByFiles reports whether the pod's next status change shows in its
// files first: a pod being deleted whose containers exit on the TERM, or
// a pod whose job the last listing saw RUNNING and whose containers have
// not all started yet (Running needs one: exec and attach find it).
func (pj *podJob) watchedByFiles() bool {
	if !pj.listed || pj.status.Phase == corev1.PodSucceeded || pj.status.Phase == corev1.PodFailed {
		return false
	}
	return pj.deleting || pj.job != nil && pj.job.State == stateRunning && pj.status.Phase == corev1.PodPending
}

// poll lists the node's jobs once and reports the pods whose status
// changed.
func (p *Provider) poll(ctx context.Context) error {
	listed := time.Now()
	jobs, err := p.cli.listNamed(ctx, p.jobName)
	var refused *listingError
	if errors.As(err, &refused) {
		log.G(ctx).WithError(err).Warn("the node's job listing is not as expected: listing all jobs with squeue --json instead")
		jobs, err = p.cli.squeue(ctx)
	}
	if err != nil {
		return err
	}
	byID := make(map[string]*job, len(jobs))
	for i := range jobs {
		byID[jobs[i].jobID()] = &jobs[i]
	}
	p.mu.Lock()
	p.logForged(ctx, jobs)
	reads := make([]statusRead, 0, len(p.pods))
	for key, pj := range p.pods {
		if pj.jobID == "" || listed.Before(pj.submitted) {
			continue
		}
		j := byID[pj.jobID]
		if j != nil && !p.owns(j, pj.tenant, pj.pod.UID) {
			// The ID sbatch returned names another user's job: Slurm
			// reused it after ours was purged, so ours is gone.
			log.G(ctx).Warnf("pod %s: job %s now belongs to user %d (%q): not the pod's", key, pj.jobID, j.UserID, j.Comment)
			j = nil
		}
		pj.job, pj.listed = j, true
		if pj.reachedDeadline(listed) {
			p.cancelAtDeadline(ctx, pj.tenant.cred, pj.jobID)
		}
		reads = append(reads, p.beginRead(key, pj, pj.deleting && (pj.job == nil || jobDone(pj.job.State))))
	}
	p.mu.Unlock()
	p.finishReads(reads)
	return nil
}

// logForged logs, once each, the jobs that carry this node's job name but
// are not the job sbatch returned for any pod: any Slurm user can submit
// one, with any comment. They change no pod's status; p.mu must be held.
func (p *Provider) logForged(ctx context.Context, jobs []job) {
	ours := make(map[string]bool, len(p.pods))
	// submitting are the users with a submission whose job ID is not
	// known yet: such a job may be theirs.
	submitting := map[uint32]bool{}
	for _, pj := range p.pods {
		if pj.jobID == "" {
			ours[jobComment(pj.pod.UID)] = true
			submitting[pj.tenant.uid] = true
		} else {
			ours[pj.jobID] = true
		}
	}
	listed := make(map[string]bool, len(p.ignored))
	for i := range jobs {
		j := &jobs[i]
		id := j.jobID()
		if j.Name != p.jobName || ours[id] || (!j.brief && ours[j.Comment]) {
			continue
		}
		if j.brief && submitting[j.UserID] {
			// Its comment is not listed: judged at a later poll, once
			// the submissions have returned.
			if p.ignored[id] {
				listed[id] = true
			}
			continue
		}
		listed[id] = true
		if p.ignored[id] {
			continue
		}
		if j.brief {
			log.G(ctx).Warnf("job %s of user %d is named %s but is no pod's job on this node: ignored", id, j.UserID, j.Name)
		} else {
			log.G(ctx).Warnf("job %s of user %d is named %s with comment %q but is no pod's job on this node: ignored", id, j.UserID, j.Name, j.Comment)
		}
	}
	p.ignored = listed
}

// reachedDeadline marks the pod past its activeDeadlineSeconds, counted
// from the job's start as a kubelet counts from the pod's, once now is
// past it; it reports whether this call did.
func (pj *podJob) reachedDeadline(now time.Time) bool {
	d := pj.pod.Spec.ActiveDeadlineSeconds
	if pj.pastDeadline || d == nil || pj.job == nil || pj.job.StartTime <= 0 || pj.job.State == statePending || jobDone(pj.job.State) {
		return false
	}
	if now.Before(time.Unix(pj.job.StartTime, 0).Add(time.Duration(*d) * time.Second)) {
		return false
	}
	pj.pastDeadline = true
	return true
}

// cancelAtDeadline stops a job whose pod reached its deadline, as a kubelet
// kills the containers of such a pod (no grace period beyond Slurm's
// KillWait).
func (p *Provider) cancelAtDeadline(ctx context.Context, cred *syscall.Credential, id string) {
	go func() {
		if err := p.scancel.stop(ctx, cred, stopCancel, id); err != nil && ctx.Err() == nil {
			log.G(ctx).WithError(err).Warnf("cancelling job %s at the pod's active deadline", id)
		}
	}()
}
