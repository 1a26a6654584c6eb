package slurm

import (
	"context"
	"fmt"
	"io/fs"
	"path/filepath"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// evictionInterval is how often emptyDir usage is measured, as the
// kubelet's eviction manager does its housekeeping.
const evictionInterval = 10 * time.Second

// evictOverfullEmptyDirs evicts the running pods with an emptyDir past its
// sizeLimit, as the kubelet does: the pod fails Evicted, naming the volume,
// and its job is cancelled. The directories are measured without the
// provider's lock: a tenant's million files slow only this loop.
func (p *Provider) evictOverfullEmptyDirs(ctx context.Context) {
	type candidate struct {
		key string
		pj  *podJob
	}
	var pods []candidate
	p.mu.Lock()
	for key, pj := range p.pods {
		if pj.evicted == "" && !pj.deleting && pj.job != nil && pj.job.State == stateRunning && hasSizeLimit(pj.pod) {
			pods = append(pods, candidate{key, pj})
		}
	}
	p.mu.Unlock()
	for _, c := range pods {
		why := overfullEmptyDir(c.pj.dir, c.pj.pod)
		if why == "" {
			continue
		}
		p.mu.Lock()
		if p.pods[c.key] != c.pj || c.pj.evicted != "" {
			p.mu.Unlock()
			continue
		}
		c.pj.evicted = why
		p.report(c.key, c.pj)
		cred, id := c.pj.tenant.cred, c.pj.jobID
		p.mu.Unlock()
		log.G(ctx).Infof("pod %s evicted: %s", c.key, why)
		if err := p.scancel.stop(ctx, cred, stopCancel, id); err != nil && ctx.Err() == nil {
			log.G(ctx).WithError(err).Warnf("cancelling job %s of the evicted pod %s", id, c.key)
		}
	}
}

func hasSizeLimit(pod *corev1.Pod) bool {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir != nil && v.EmptyDir.SizeLimit != nil {
			return true
		}
	}
	return false
}

// overfullEmptyDir names the first emptyDir of the pod whose usage
// exceeds its sizeLimit, in the kubelet's words; empty when none does.
func overfullEmptyDir(dir string, pod *corev1.Pod) string {
	for _, v := range pod.Spec.Volumes {
		if v.EmptyDir == nil || v.EmptyDir.SizeLimit == nil {
			continue
		}
		limit := v.EmptyDir.SizeLimit.Value()
		if diskUsage(filepath.Join(dir, "empty", v.Name), limit) > limit {
			return fmt.Sprintf("Usage of EmptyDir volume %q exceeds the limit %q. ", v.Name, v.EmptyDir.SizeLimit.String())
		}
	}
	return ""
}

// diskUsage sums the disk blocks of the files beneath root, as du does,
// without following symlinks, and stops once past limit.
func diskUsage(root string, limit int64) int64 {
	var used int64
	_ = filepath.WalkDir(root, func(_ string, d fs.DirEntry, err error) error {
		if err != nil {
			return nil
		}
		info, err := d.Info()
		if err != nil {
			return nil
		}
		if st, ok := info.Sys().(*syscall.Stat_t); ok {
			used += st.Blocks * 512
		} else {
			used += info.Size()
		}
		if used > limit {
			return fs.SkipAll
		}
		return nil
	})
	return used
}
