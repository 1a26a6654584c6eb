package slurm

import (
	"bytes"
	"fmt"
	"io/fs"
	"os"
	"path"
	"path/filepath"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/volume"
	"github.com/vkubelet/virtual-kubelet/providers/slurm/internal/sandbox"
)

// A pod's directory, workDir/<pod UID>, belongs to the pod's tenant (mode
// 0700, files 0600) and holds what its job reads (see the launcher,
// package internal/sandbox) and what the job writes back: per container
// c/NAME/{info,log,exit}, and c/NAME/{in,in.holder} for one with stdin.
// The pod's own volumes live in it too: vol/NAME for those the controller
// resolves, empty/NAME for emptyDirs, and tmp for the containers' /tmp.
// The daemon writes it through an os.Root, which resolves every path
// beneath the directory: the tenant's jobs can plant symlinks there, and
// none leads a write of the daemon out of it.

// podDir is where the pod with this UID keeps its files.
func (p *Provider) podDir(pod *corev1.Pod) string {
	return filepath.Join(p.cfg.WorkDir, string(pod.UID))
}

// containerPlan is what one container runs, resolved from the pod spec.
type containerPlan struct {
	name string
	argv []string
	env  []string
	// mounts are (volume, subPath, destination, mode) quadruples: volume
	// is the volume's directory relative to the pod's ("vol/NAME" or
	// "empty/NAME", empty for a tmpfs), subPath what the container mounts
	// of it, mode ro, rw or tmpfs.
	mounts []string
	// root is the image's root directory; empty for the host's paths.
	root    string
	workDir string
	// stdin gives the container a standard input that attach writes to.
	stdin bool
	// tty runs the container on a terminal of its own.
	tty bool
	// stopSignal is the number of the signal that stops the container
	// (its lifecycle.stopSignal); empty for TERM.
	stopSignal string
}

// plan resolves what each container runs, or says, as an InvalidInput
// error, what in the pod the provider cannot run.
func (p *Provider) plan(pod *corev1.Pod) (init, main []containerPlan, err error) {
	if !podUID.MatchString(string(pod.UID)) {
		return nil, nil, errdefs.InvalidInputf("pod UID %q cannot name a directory", pod.UID)
	}
	volumes := map[string]corev1.Volume{}
	for _, v := range pod.Spec.Volumes {
		switch {
		case volume.IsResolved(&v), v.EmptyDir != nil:
			volumes[v.Name] = v
		default:
			return nil, nil, errdefs.InvalidInputf("volume %q: only configMap, secret, downwardAPI, projected and emptyDir volumes are supported on a Slurm node", v.Name)
		}
	}
	one := func(c *corev1.Container) (containerPlan, error) {
		if !sandbox.ValidContainerName(c.Name) {
			return containerPlan{}, errdefs.InvalidInputf("container name %q is not a DNS label", c.Name)
		}
		img, ok := p.cfg.Images[c.Image]
		if !ok {
			return containerPlan{}, errdefs.InvalidInputf("container %q: image %q is not in the node's image table (%s)", c.Name, c.Image, strings.Join(sortedKeys(p.cfg.Images), ", "))
		}
		cp := containerPlan{name: c.Name, root: img.Root, workDir: c.WorkingDir, stdin: c.Stdin, tty: c.TTY}
		var err error
		if cp.stopSignal, err = stopSignalOf(c); err != nil {
			return cp, err
		}
		cp.argv = append(append(append(cp.argv, img.Prefix...), c.Command...), c.Args...)
		if len(cp.argv) == 0 {
			return cp, errdefs.InvalidInputf("container %q: image %q has no default command: set command", c.Name, c.Image)
		}
		for _, e := range c.Env {
			cp.env = append(cp.env, e.Name+"="+e.Value)
		}
		for _, m := range c.VolumeMounts {
			v, ok := volumes[m.Name]
			if !ok {
				return cp, errdefs.InvalidInputf("container %q: volumeMount %q names no volume of the pod", c.Name, m.Name)
			}
			if !filepath.IsAbs(m.MountPath) || (m.SubPath != "" && !filepath.IsLocal(m.SubPath)) {
				return cp, errdefs.InvalidInputf("container %q: volumeMount %q: mountPath must be absolute and subPath local", c.Name, m.Name)
			}
			src, mode := "vol/"+m.Name, "ro"
			if v.EmptyDir != nil {
				src = "empty/" + m.Name
				if !m.ReadOnly {
					mode = "rw"
				}
			}
			cp.mounts = append(cp.mounts, src, m.SubPath, filepath.Clean(m.MountPath), mode)
		}
		return cp, nil
	}
	for i := range pod.Spec.InitContainers {
		cp, err := one(&pod.Spec.InitContainers[i])
		if err != nil {
			return nil, nil, err
		}
		init = append(init, cp)
	}
	for i := range pod.Spec.Containers {
		cp, err := one(&pod.Spec.Containers[i])
		if err != nil {
			return nil, nil, err
		}
		main = append(main, cp)
	}
	return init, main, nil
}

// writePodDir writes what the job reads: the container lists, each
// container's plan, and what of the host its containers may see.
func (p *Provider) writePodDir(pod *corev1.Pod, t *tenant, init, main []containerPlan) error {
	d, err := p.openPodFS(pod, t)
	if err != nil {
		return err
	}
	defer d.Close()
	for _, sub := range []string{"c", "tmp", "empty", "vol"} {
		if err := d.mkdir(sub); err != nil {
			return err
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			if err := d.mkdir(path.Join("empty", v.Name)); err != nil {
				return err
			}
		}
	}
	names := func(plans []containerPlan) []string {
		var out []string
		for _, cp := range plans {
			out = append(out, cp.name)
		}
		return out
	}
	hostname := pod.Spec.Hostname
	if hostname == "" {
		hostname = pod.Name
	}
	files := map[string][]byte{
		"init":      nulList(names(init)),
		"main":      nulList(names(main)),
		"hostname":  []byte(hostname),
		"hostpaths": p.hostPaths,
		"hidden":    p.hidden,
		"logmax":    fmt.Appendf(nil, "%d %d\n", p.cfg.logMaxBytes, p.cfg.ContainerLogMaxFiles),
	}
	gpus, containerGPUs := p.gpuPlan(pod)
	files[sandbox.GPUsFile] = []byte(gpus)
	files[sandbox.GPUFilesFile] = nulList(p.cfg.GPUFiles)
	for _, cp := range append(append([]containerPlan(nil), init...), main...) {
		c := path.Join("c", cp.name)
		if err := d.mkdir(c); err != nil {
			return err
		}
		files[path.Join(c, "argv")] = nulList(cp.argv)
		files[path.Join(c, "env")] = nulList(cp.env)
		files[path.Join(c, "mounts")] = nulList(cp.mounts)
		files[path.Join(c, "root")] = []byte(cp.root)
		files[path.Join(c, "workdir")] = []byte(cp.workDir)
		files[path.Join(c, "stdin")] = yesNo(cp.stdin)
		files[path.Join(c, "tty")] = yesNo(cp.tty)
		files[path.Join(c, sandbox.GPUsFile)] = []byte(containerGPUs[cp.name])
		files[path.Join(c, sandbox.StopSignalFile)] = []byte(cp.stopSignal)
	}
	for name, data := range files {
		if err := d.write(name, data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// slurmCommands are the Slurm and munge client commands a container of a
// host image must not find: a job's own credentials would let it act on
// the tenant's other jobs from inside a pod.
var slurmCommands = []string{"munge", "remunge", "unmunge", "sacct", "sacctmgr", "salloc", "sattach", "sbatch", "sbcast", "scancel", "scontrol", "scrontab", "sdiag", "sh5util", "sinfo", "sprio", "squeue", "sreport", "srun", "sshare", "sstat", "strigger", "sview"}

// hiddenPaths are the host paths no container sees, even beneath a host
// path: Slurm's and munge's configuration and commands, and the work
// directory with every pod's files.
func (p *Provider) hiddenPaths() []string {
	hidden := []string{"/etc/munge", "/etc/slurm", "/etc/slurm-llnl", "/run/munge", "/var/run/munge", "/var/lib/munge", "/var/spool/slurmd", "/var/spool/slurmctld", p.cfg.WorkDir}
	if p.cfg.SlurmConf != "" {
		hidden = append(hidden, filepath.Dir(p.cfg.SlurmConf))
	}
	for _, dir := range []string{p.cfg.SlurmBin, "/usr/bin", "/usr/sbin", "/usr/local/bin"} {
		for _, c := range slurmCommands {
			hidden = append(hidden, filepath.Join(dir, c))
		}
	}
	return hidden
}

// yesNo is how the job reads a flag.
func yesNo(b bool) []byte {
	if b {
		return []byte("yes")
	}
	return []byte("no")
}

// nulList is a NUL-terminated list, as the job reads lists; a NUL
// inside an item cannot be passed to a process anyway, so it is refused
// earlier by the API server's validation and dropped here.
func nulList(items []string) []byte {
	var b bytes.Buffer
	for _, s := range items {
		b.WriteString(strings.ReplaceAll(s, "\x00", ""))
		b.WriteByte(0)
	}
	return b.Bytes()
}

// writeAtomic replaces a file of the daemon's own in one rename.
func writeAtomic(name string, data []byte, mode os.FileMode) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil { //nolint:gosec // G703: name is the daemon's own, beneath its work directory
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// writeVolumes writes the resolved volumes' files under vol/, replacing
// each file in place (bind mounts of running containers see the new
// contents) and removing the files the volumes no longer have.
func (p *Provider) writeVolumes(pod *corev1.Pod, t *tenant, contents *volume.Contents) error {
	d, err := p.openPodFS(pod, t)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.mkdir("vol"); err != nil {
		return err
	}
	for _, v := range contents.Volumes {
		root := path.Join("vol", v.Name)
		if err := d.mkdir(root); err != nil {
			return err
		}
		keep := map[string]bool{}
		for _, f := range v.Files {
			if !filepath.IsLocal(f.Path) {
				return fmt.Errorf("volume %q: file path %q leaves the volume", v.Name, f.Path)
			}
			name := path.Join(root, filepath.ToSlash(f.Path))
			keep[name] = true
			if err := d.mkdir(path.Dir(name)); err != nil {
				return err
			}
			if err := d.write(name, []byte(f.Data), os.FileMode(f.Mode&0o777)); err != nil {
				return err
			}
		}
		err := fs.WalkDir(d.root.FS(), root, func(name string, e fs.DirEntry, err error) error {
			if err != nil || e.IsDir() || keep[name] {
				return err
			}
			return d.root.Remove(name)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
