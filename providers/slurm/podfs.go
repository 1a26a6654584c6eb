package slurm

import (
	"bytes"
	"errors"
	"io/fs"
	"os"
	"path"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// podFS writes one pod's directory as the daemon. Every path goes through
// an os.Root opened on the directory, so a symlink a tenant's job planted
// never leads a write out of it, and what is written belongs to the
// tenant's user.
type podFS struct {
	root     *os.Root
	uid, gid int
	// chown is set when the daemon is root and so owns what it writes
	// until it gives it to the tenant.
	chown bool
}

// openPodFS opens the pod's directory, creating it (0700, the tenant's)
// when it does not exist yet.
func (p *Provider) openPodFS(pod *corev1.Pod, t *tenant) (*podFS, error) {
	name := string(pod.UID)
	if !podUID.MatchString(name) {
		return nil, errdefs.InvalidInputf("pod UID %q cannot name a directory", pod.UID)
	}
	work, err := os.OpenRoot(p.cfg.WorkDir)
	if err != nil {
		return nil, err
	}
	defer work.Close()
	d := &podFS{uid: int(t.uid), gid: int(t.gid), chown: os.Geteuid() == 0}
	if err := work.Mkdir(name, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return nil, err
	}
	if d.chown {
		if err := work.Lchown(name, d.uid, d.gid); err != nil {
			return nil, err
		}
	}
	if d.root, err = work.OpenRoot(name); err != nil {
		return nil, err
	}
	return d, nil
}

// Close releases the directory.
func (d *podFS) Close() error { return d.root.Close() }

// mkdir makes rel and its parents, each 0700 and the tenant's.
func (d *podFS) mkdir(rel string) error {
	if rel == "." || rel == "" {
		return nil
	}
	if err := d.mkdir(path.Dir(rel)); err != nil {
		return err
	}
	if err := d.root.Mkdir(rel, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
		return err
	}
	if d.chown {
		return d.root.Lchown(rel, d.uid, d.gid)
	}
	return nil
}

// write replaces rel in one rename, so the job and the bind mounts of
// running containers never see half a file. The temporary file is created
// anew (O_EXCL): whatever the tenant left under its name is not written
// through.
func (d *podFS) write(rel string, data []byte, mode os.FileMode) error {
	tmp := rel + ".tmp"
	if err := d.root.Remove(tmp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return err
	}
	f, err := d.root.OpenFile(tmp, os.O_WRONLY|os.O_CREATE|os.O_EXCL, mode)
	if err != nil {
		return err
	}
	_, err = f.Write(data)
	if err == nil && d.chown {
		err = f.Chown(d.uid, d.gid)
	}
	if err == nil {
		err = f.Chmod(mode)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return err
	}
	return d.root.Rename(tmp, rel)
}

// copyExecutable installs src at dst (0755) unless dst already has the
// same bytes.
func copyExecutable(src, dst string) error {
	want, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	if have, err := os.ReadFile(dst); err == nil && bytes.Equal(have, want) {
		return nil
	}
	return writeAtomic(dst, want, 0o755)
}
