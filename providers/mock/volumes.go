package mock

import (
	"context"
	"path"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// podVolumes are the files of one pod's volumes. Both contents are
// read-only once stored, so sessions read them without the lock.
type podVolumes struct {
	uid types.UID
	// current is the latest contents; started is the first the pod got,
	// which subPath mounts keep, as on a kubelet.
	current, started *volume.Contents
}

// SetPodVolumes implements node.PodVolumeHandler: the files become readable
// in the pod's containers at their volumeMounts (kubectl exec cat PATH).
func (p *Provider) SetPodVolumes(_ context.Context, pod *corev1.Pod, contents *volume.Contents) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := podKey(pod.Namespace, pod.Name)
	if v, ok := p.volumes[key]; ok && v.uid == pod.UID {
		v.current = contents
		return nil
	}
	put(&p.volumes, key, &podVolumes{uid: pod.UID, current: contents, started: contents})
	return nil
}

// ReadsTokensOnRead implements node.TokenOnReadHandler: a mock pod's
// token is requested when something reads it (kubectl exec cat), not for
// every pod it starts.
func (p *Provider) ReadsTokensOnRead() bool { return true }

// forgetVolumes drops the files of the pod's volumes, unless they are a
// newer pod's of the same name.
func (p *Provider) forgetVolumes(pod *corev1.Pod) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.forgetVolumesLocked(pod)
}

// forgetVolumesLocked is forgetVolumes with p.mu held.
func (p *Provider) forgetVolumesLocked(pod *corev1.Pod) {
	key := podKey(pod.Namespace, pod.Name)
	if v, ok := p.volumes[key]; ok && v.uid == pod.UID {
		delete(p.volumes, key)
	}
}

// mountedFiles returns how a container finds the files of its volume
// mounts, and lists them; p.mu must be held.
func (p *Provider) mountedFiles(ps *podState, c containerSpec) (func(string) (volume.File, bool), func() []string) {
	v := p.volumes[podKey(ps.pod.namespace, ps.pod.name)]
	if v == nil || v.uid != ps.pod.uid {
		return func(string) (volume.File, bool) { return volume.File{}, false }, func() []string { return nil }
	}
	list := func() []string {
		var names []string
		for _, m := range c.mounts {
			contents := v.current
			if m.SubPath != "" {
				contents = v.started
			}
			vol := contents.Volume(m.Name)
			if vol == nil {
				continue
			}
			for _, f := range vol.Files {
				rel, ok := f.Path, true
				if m.SubPath != "" {
					rel, ok = strings.CutPrefix(f.Path, m.SubPath)
					ok = ok && (rel == "" || strings.HasPrefix(rel, "/"))
				}
				if ok {
					names = append(names, path.Join(m.MountPath, rel))
				}
			}
		}
		return names
	}
	lookup := func(name string) (volume.File, bool) {
		mount, rel, ok := mountOf(c.mounts, path.Clean(name))
		if !ok {
			return volume.File{}, false
		}
		contents := v.current
		if mount.SubPath != "" {
			contents, rel = v.started, path.Join(mount.SubPath, rel)
		}
		vol := contents.Volume(mount.Name)
		if vol == nil {
			return volume.File{}, false
		}
		return vol.File(rel)
	}
	return lookup, list
}

// mountOf finds the mount holding the absolute path name (the deepest, if
// mounts nest) and the path relative to it.
func mountOf(mounts []corev1.VolumeMount, name string) (corev1.VolumeMount, string, bool) {
	var best corev1.VolumeMount
	var rel string
	found := false
	for _, m := range mounts {
		mp := path.Clean(m.MountPath)
		var r string
		switch {
		case name == mp:
			r = "."
		case strings.HasPrefix(name, strings.TrimSuffix(mp, "/")+"/"):
			r = strings.TrimPrefix(name, strings.TrimSuffix(mp, "/")+"/")
		default:
			continue
		}
		if !found || len(mp) > len(path.Clean(best.MountPath)) {
			best, rel, found = m, r, true
		}
	}
	return best, rel, found
}
