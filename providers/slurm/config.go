package slurm

import (
	"errors"
	"fmt"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/vkubelet/virtual-kubelet/provider"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// Config is the --provider-config file, in YAML or JSON:
//
//	partition: batch          # sbatch --partition; empty: the cluster's default
//	account: physics          # sbatch --account
//	qos: normal               # sbatch --qos
//	workDir: /shared/vk       # shared with the compute nodes: one directory per pod
//	stateDir: /var/lib/vk-slurm   # the daemon's own records of its jobs; default workDir/.vk-state
//	tenants:                  # namespaces -> Unix users; required when the daemon runs as root
//	- namespaces: [team-a]
//	  namespaceSelector: {matchLabels: {hpc.example.org/tenant: physics}}   # and the namespaces labelled so
//	  user: alice             # jobs are submitted as this user, never root
//	  group: physics          # default: the user's primary group
//	  account: physics        # default: the account above
//	  partitions: [batch]     # those its pods may ask for; the first is the default
//	  qos: [normal]
//	  annotations: [constraint, nice]   # sbatch-* annotations it may set (see SbatchOptions)
//	  reservations: [maint]   # what sbatch-reservation may name
//	  licenses: [matlab]      # what sbatch-licenses may name
//	allow: {annotations: [constraint]}   # without tenants: what pods may ask (see Allow)
//	hostPaths: [/usr, /etc]   # what containers of host images see of the host, read-only
//	gres: {nvidia.com/gpu: gpu}   # extended resources a pod may request, as the GRES they become
//	devices: [gpu]            # GRES published as DRA devices (driver gpu.slurm.vkubelet.io); default [gpu], [] for none
//	gpuFiles: ["/dev/nvidia{index}", /dev/nvidiactl]   # device files a container sees of its GPUs; default NVIDIA's
//	containerLogMaxSize: 10Mi # a container log is rotated at this size ...
//	containerLogMaxFiles: 5   # ... keeping this many files, as the kubelet's
//	slurmBin: /usr/bin        # where sbatch, squeue, scancel, srun and sinfo are
//	slurmConf: /etc/slurm/slurm.conf   # SLURM_CONF for those commands; empty: theirs
//	bwrap: /usr/bin/bwrap     # bubblewrap on the compute nodes
//	launcher: /usr/local/bin/virtual-kubelet-slurm-container   # default: beside the daemon, else on PATH
//	pollInterval: 2s          # one squeue for all the node's jobs per interval
//	images:                   # what each container image runs as; others are refused
//	  busybox: {host: true}                       # the command on the host (read-only)
//	  python:3.12: {prefix: [/opt/py312/bin/python3]}   # the command after a prefix
//	  debian:12: {root: /srv/images/debian12}     # a directory as the root file system
//	capacity: {cpu: "64", memory: 256Gi, pods: "500"}   # or left out: from sinfo
type Config struct {
	Partition string   `json:"partition,omitempty"`
	Account   string   `json:"account,omitempty"`
	QOS       string   `json:"qos,omitempty"`
	WorkDir   string   `json:"workDir"`
	StateDir  string   `json:"stateDir,omitempty"`
	Tenants   []Tenant `json:"tenants,omitempty"`
	HostPaths []string `json:"hostPaths,omitempty"`
	// Gres maps extended resources (nvidia.com/gpu) to the Slurm GRES
	// names (gpu) a job asks for: a pod's limit of 2 becomes --gres=gpu:2.
	// List each in capacity, so the scheduler counts them.
	Gres map[string]string `json:"gres,omitempty"`
	// Devices are the GRES the Slurm nodes' devices are published as, for
	// Dynamic Resource Allocation (see DeviceDriverSuffix); nil:
	// DefaultDeviceGres.
	Devices []string `json:"devices,omitempty"`
	// GPUFiles are the device files a container with GPUs gets in its
	// /dev (as /dev/ and the base name), those with {index} once per GPU
	// by its Slurm index, those missing on the node skipped; nil:
	// DefaultGPUFiles.
	GPUFiles []string `json:"gpuFiles,omitempty"`
	// ContainerLogMaxSize and ContainerLogMaxFiles bound each container's
	// log on disk, as the kubelet's settings of the same names do.
	ContainerLogMaxSize  string `json:"containerLogMaxSize,omitempty"`
	ContainerLogMaxFiles int    `json:"containerLogMaxFiles,omitempty"`
	SlurmBin             string `json:"slurmBin,omitempty"`
	SlurmConf            string `json:"slurmConf,omitempty"`
	Bwrap                string `json:"bwrap,omitempty"`
	// Launcher is the program every job runs (its containers, their logs
	// and exit codes), which the daemon installs in workDir; empty: virtual-kubelet-slurm-container beside the
	// daemon's executable, else on PATH.
	Launcher     string            `json:"launcher,omitempty"`
	PollInterval string            `json:"pollInterval,omitempty"`
	Images       map[string]Image  `json:"images"`
	Capacity     map[string]string `json:"capacity,omitempty"`
	// Allow is what pods may ask of Slurm when there are no tenants (the
	// daemon's own user runs every job).
	Allow Allow `json:"allow,omitempty"`

	poll time.Duration
	// logMaxBytes is ContainerLogMaxSize in bytes.
	logMaxBytes int64
	// tenants are Tenants resolved to Unix ids, by namespace name.
	tenants map[string]*tenant
	// bySelector are the tenants with a namespaceSelector, in order.
	bySelector []*tenant
	// resolved are all the tenants, in order.
	resolved []*tenant
}

// DefaultHostPaths are what a container of a host image sees of the host
// when hostPaths is not set: programs, libraries and configuration, never
// the host's root, /home, /run (munge's socket), /var or /tmp.
var DefaultHostPaths = []string{"/bin", "/etc", "/lib", "/lib32", "/lib64", "/libx32", "/opt", "/sbin", "/usr"}

// Image says what a container of an image runs: exactly one of the fields.
type Image struct {
	// Host runs the command on the host's file system, mounted read-only.
	Host bool `json:"host,omitempty"`
	// Prefix runs the prefix, then the container's command and args, on the
	// host's file system.
	Prefix []string `json:"prefix,omitempty"`
	// Root is a directory used, read-only, as the container's root.
	Root string `json:"root,omitempty"`
}

// DefaultPollInterval is how often squeue is asked about the node's jobs.
const DefaultPollInterval = 2 * time.Second

// LoadConfig reads and validates the config file. Errors name the file and
// the field.
func LoadConfig(path string) (*Config, error) {
	var cfg Config
	if err := provider.LoadConfig(path, "the work directory and the image table (see providers/slurm.Config)", &cfg, cfg.validate); err != nil {
		return nil, err
	}
	return &cfg, nil
}

func (c *Config) validate() error {
	if c.WorkDir == "" || !filepath.IsAbs(c.WorkDir) {
		return fmt.Errorf("workDir: must be an absolute path shared with the compute nodes, got %q", c.WorkDir)
	}
	c.WorkDir = filepath.Clean(c.WorkDir)
	for field, v := range map[string]*string{"slurmBin": &c.SlurmBin, "bwrap": &c.Bwrap, "slurmConf": &c.SlurmConf, "launcher": &c.Launcher} {
		if *v != "" && !filepath.IsAbs(*v) {
			return fmt.Errorf("%s: must be an absolute path, got %q", field, *v)
		}
	}
	if c.SlurmBin == "" {
		c.SlurmBin = "/usr/bin"
	}
	if c.Bwrap == "" {
		c.Bwrap = "/usr/bin/bwrap"
	}
	for field, v := range map[string]string{"partition": c.Partition, "account": c.Account, "qos": c.QOS} {
		if err := slurmName(field, v); err != nil {
			return err
		}
	}
	if c.StateDir == "" {
		c.StateDir = filepath.Join(c.WorkDir, ".vk-state")
	}
	if !filepath.IsAbs(c.StateDir) {
		return fmt.Errorf("stateDir: must be an absolute path, got %q", c.StateDir)
	}
	c.StateDir = filepath.Clean(c.StateDir)
	if c.HostPaths == nil {
		c.HostPaths = DefaultHostPaths
	}
	for i, hp := range c.HostPaths {
		if !filepath.IsAbs(hp) || filepath.Clean(hp) == "/" {
			return fmt.Errorf("hostPaths[%d]: must be an absolute path other than /, got %q", i, hp)
		}
		c.HostPaths[i] = filepath.Clean(hp)
	}
	size := resource.MustParse("10Mi")
	if c.ContainerLogMaxSize != "" {
		q, err := resource.ParseQuantity(c.ContainerLogMaxSize)
		if err != nil || q.Value() < 1<<10 {
			return fmt.Errorf("containerLogMaxSize: must be a quantity of at least 1Ki such as 10Mi, got %q", c.ContainerLogMaxSize)
		}
		size = q
	}
	c.logMaxBytes = size.Value()
	if c.ContainerLogMaxFiles == 0 {
		c.ContainerLogMaxFiles = 5
	}
	if c.ContainerLogMaxFiles < 2 {
		return fmt.Errorf("containerLogMaxFiles: must be at least 2 (the kubelet's bound), got %d", c.ContainerLogMaxFiles)
	}
	for _, name := range sortedKeys(c.Gres) {
		if !strings.Contains(name, "/") || strings.HasPrefix(name, "kubernetes.io/") {
			return fmt.Errorf("gres: %q is not an extended resource name (domain/name)", name)
		}
		if err := slurmName("gres."+name, c.Gres[name]); err != nil || c.Gres[name] == "" || strings.Contains(c.Gres[name], ":") {
			return fmt.Errorf("gres.%s: %q is not a GRES name", name, c.Gres[name])
		}
	}
	if err := c.validateDevices(); err != nil {
		return err
	}
	if err := c.Allow.validate("allow."); err != nil {
		return err
	}
	if err := c.resolveTenants(); err != nil {
		return err
	}
	c.poll = DefaultPollInterval
	if c.PollInterval != "" {
		d, err := time.ParseDuration(c.PollInterval)
		if err != nil || d < 100*time.Millisecond {
			return fmt.Errorf("pollInterval: must be a duration of at least 100ms such as \"2s\", got %q", c.PollInterval)
		}
		c.poll = d
	}
	if len(c.Images) == 0 {
		return errors.New("images: the table is empty: name at least one image, e.g. {busybox: {host: true}}")
	}
	for _, name := range sortedKeys(c.Images) {
		img := c.Images[name]
		set := 0
		for _, ok := range []bool{img.Host, len(img.Prefix) > 0, img.Root != ""} {
			if ok {
				set++
			}
		}
		if set != 1 {
			return fmt.Errorf("images.%s: set exactly one of host: true, prefix: [command...] or root: /directory", name)
		}
		if img.Root != "" && !filepath.IsAbs(img.Root) {
			return fmt.Errorf("images.%s.root: must be an absolute path, got %q", name, img.Root)
		}
	}
	for name, v := range c.Capacity {
		q, err := resource.ParseQuantity(v)
		if err != nil {
			return fmt.Errorf("capacity.%s: invalid quantity %q: %v", name, v, err)
		}
		if q.Sign() < 0 {
			return fmt.Errorf("capacity.%s: quantity %q must not be negative", name, v)
		}
	}
	return nil
}

// capacity returns the fixed capacity, or nil when it comes from sinfo;
// validate has checked the quantities.
func (c *Config) capacity() corev1.ResourceList {
	if len(c.Capacity) == 0 {
		return nil
	}
	out := corev1.ResourceList{}
	for name, v := range c.Capacity {
		out[corev1.ResourceName(name)] = resource.MustParse(v)
	}
	return out
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
