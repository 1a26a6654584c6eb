package slurm

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// A pod's directory, workDir/<pod UID>, holds what its job reads (see
// job.sh) and what the job writes back: per container c/NAME/{info,log,exit},
// and c/NAME/{in,in.holder} for one with stdin.
// The pod's own volumes live in it too: vol/NAME for those the controller
// resolves, empty/NAME for emptyDirs, and tmp for the containers' /tmp.

// containerName is what a container name must look like to be a directory.
var containerName = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// podDir is where the pod with this UID keeps its files.
func (p *Provider) podDir(pod *corev1.Pod) string {
	return filepath.Join(p.cfg.WorkDir, string(pod.UID))
}

// containerPlan is what one container runs, resolved from the pod spec.
type containerPlan struct {
	name    string
	argv    []string
	env     []string
	mounts  []string // source, destination, mode triples
	root    string
	workDir string
	// stdin gives the container a standard input that attach writes to.
	stdin bool
	// tty runs the container on a terminal of its own.
	tty bool
}

// plan resolves what each container runs, or says, as an InvalidInput
// error, what in the pod the provider cannot run.
func (p *Provider) plan(pod *corev1.Pod, dir string) (init, main []containerPlan, err error) {
	if pod.UID == "" || strings.ContainsAny(string(pod.UID), "/.") {
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
		if !containerName.MatchString(c.Name) {
			return containerPlan{}, errdefs.InvalidInputf("container name %q is not a DNS label", c.Name)
		}
		img, ok := p.cfg.Images[c.Image]
		if !ok {
			return containerPlan{}, errdefs.InvalidInputf("container %q: image %q is not in the node's image table (%s)", c.Name, c.Image, strings.Join(sortedKeys(p.cfg.Images), ", "))
		}
		cp := containerPlan{name: c.Name, root: "/", workDir: c.WorkingDir, stdin: c.Stdin, tty: c.TTY}
		cp.argv = append(append(append(cp.argv, img.Prefix...), c.Command...), c.Args...)
		if len(cp.argv) == 0 {
			return cp, errdefs.InvalidInputf("container %q: image %q has no default command: set command", c.Name, c.Image)
		}
		if img.Root != "" {
			cp.root = img.Root
		} else {
			// Other pods' files are in the work directory: hide it.
			cp.mounts = append(cp.mounts, "", p.cfg.WorkDir, "tmpfs")
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
			src, mode := filepath.Join(dir, "vol", m.Name), "ro"
			if v.EmptyDir != nil {
				src = filepath.Join(dir, "empty", m.Name)
				if !m.ReadOnly {
					mode = "rw"
				}
			}
			cp.mounts = append(cp.mounts, filepath.Join(src, m.SubPath), filepath.Clean(m.MountPath), mode)
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

// writePodDir writes what the job reads: the pod itself (for adoption after
// a restart), the container lists and each container's plan.
func writePodDir(dir string, pod *corev1.Pod, init, main []containerPlan) error {
	for _, sub := range []string{"c", "tmp", "empty", "vol"} {
		if err := os.MkdirAll(filepath.Join(dir, sub), 0o700); err != nil {
			return err
		}
	}
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil {
			if err := os.MkdirAll(filepath.Join(dir, "empty", v.Name), 0o700); err != nil {
				return err
			}
		}
	}
	podJSON, err := json.Marshal(pod)
	if err != nil {
		return err
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
		"pod.json": podJSON,
		"init":     nulList(names(init)),
		"main":     nulList(names(main)),
		"hostname": []byte(hostname),
	}
	for _, cp := range append(append([]containerPlan(nil), init...), main...) {
		c := filepath.Join("c", cp.name)
		if err := os.MkdirAll(filepath.Join(dir, c), 0o700); err != nil {
			return err
		}
		files[filepath.Join(c, "argv")] = nulList(cp.argv)
		files[filepath.Join(c, "env")] = nulList(cp.env)
		files[filepath.Join(c, "mounts")] = nulList(cp.mounts)
		files[filepath.Join(c, "root")] = []byte(cp.root)
		files[filepath.Join(c, "workdir")] = []byte(cp.workDir)
		files[filepath.Join(c, "stdin")] = yesNo(cp.stdin)
		files[filepath.Join(c, "tty")] = yesNo(cp.tty)
	}
	for name, data := range files {
		if err := writeAtomic(filepath.Join(dir, name), data, 0o600); err != nil {
			return err
		}
	}
	return nil
}

// yesNo is how job.sh reads a flag.
func yesNo(b bool) []byte {
	if b {
		return []byte("yes")
	}
	return []byte("no")
}

// nulList is the NUL-terminated list job.sh reads with mapfile -d ”; a NUL
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

// writeAtomic replaces a file in one rename, so the job and the bind mounts
// of running containers never see half a file.
func writeAtomic(name string, data []byte, mode os.FileMode) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Chmod(tmp, mode); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// writeVolumes writes the resolved volumes' files under dir/vol, replacing
// each file in place (bind mounts of running containers see the new
// contents) and removing the files the volumes no longer have.
func writeVolumes(dir string, contents *volume.Contents) error {
	for _, v := range contents.Volumes {
		root := filepath.Join(dir, "vol", v.Name)
		if err := os.MkdirAll(root, 0o755); err != nil {
			return err
		}
		keep := map[string]bool{}
		for _, f := range v.Files {
			if !filepath.IsLocal(f.Path) {
				return fmt.Errorf("volume %q: file path %q leaves the volume", v.Name, f.Path)
			}
			name := filepath.Join(root, f.Path)
			keep[name] = true
			if err := os.MkdirAll(filepath.Dir(name), 0o755); err != nil {
				return err
			}
			if err := writeAtomic(name, []byte(f.Data), os.FileMode(f.Mode&0o777)); err != nil {
				return err
			}
		}
		err := filepath.WalkDir(root, func(name string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() || keep[name] {
				return err
			}
			return os.Remove(name)
		})
		if err != nil {
			return err
		}
	}
	return nil
}
