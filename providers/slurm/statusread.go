package slurm

import (
	"reflect"

	corev1 "k8s.io/api/core/v1"
)

// A pod's status is computed from what the provider knows of its job,
// taken under p.mu, and from its files in the pod directory, which the
// tenant's job writes. The files of every pod are read at each listing:
// under p.mu, hundreds of pods' reads would hold off every submission
// and delete for as long, so they are read without it (statusRead).

// statusRead is one pod's status inputs: its job as the provider knows it
// (taken under p.mu by beginRead), then its files (read without p.mu by
// readFiles), applied under p.mu again by apply.
type statusRead struct {
	key  string
	pj   *podJob
	pod  *corev1.Pod // pj.pod when the read began: UpdatePod replaces it, never changes it
	dir  string
	seq  uint64
	view jobView
	// forget is set when the pod is being deleted and its job has ended:
	// applying the read reports its last status and forgets it.
	forget bool
}

// beginRead takes the pod's job state for a status read; p.mu must be held.
func (p *Provider) beginRead(key string, pj *podJob, forget bool) statusRead {
	pj.reads++
	return statusRead{key: key, pj: pj, pod: pj.pod, dir: pj.dir, seq: pj.reads, forget: forget, view: jobView{
		gone: pj.listed && pj.job == nil, pastDeadline: pj.pastDeadline, evicted: pj.evicted, job: pj.job, podIP: p.InternalIP,
	}}
}

// readFiles reads the containers' files; p.mu need not be held.
func (r *statusRead) readFiles() {
	r.view.files = map[string]containerFiles{}
	for _, list := range [][]corev1.Container{r.pod.Spec.InitContainers, r.pod.Spec.Containers} {
		for _, c := range list {
			r.view.files[c.Name] = readContainerFiles(r.dir, c.Name)
		}
	}
}

// apply sets the status the read gives and notifies it if it changed,
// unless the pod was forgotten or replaced since, or a later read was
// applied first; a read that forgets the pod does so even then: its job
// has ended. p.mu must be held.
func (p *Provider) apply(r statusRead) {
	pj := r.pj
	if p.pods[r.key] != pj {
		return
	}
	if r.seq > pj.applied {
		pj.applied = r.seq
		if s := podStatus(r.pod, r.view); !reflect.DeepEqual(s, pj.status) {
			p.recordHold(pj.pod, pj.status, s)
			pj.status = s
			if !r.forget && p.notify != nil {
				p.notify(p.notification(pj))
			}
		}
	}
	if r.forget {
		p.forget(r.key, pj)
	}
}

// finishReads reads the pods' files without p.mu, then applies each read
// under it, and removes the directories of the pods it forgot.
func (p *Provider) finishReads(reads []statusRead) {
	if len(reads) == 0 {
		return
	}
	for i := range reads {
		reads[i].readFiles()
	}
	p.mu.Lock()
	for _, r := range reads {
		p.apply(r)
	}
	p.mu.Unlock()
	p.removeForgotten()
}

// report recomputes the pod's status now, its files read under p.mu (one
// pod's), and notifies it if it changed; p.mu must be held.
func (p *Provider) report(key string, pj *podJob) {
	r := p.beginRead(key, pj, false)
	r.readFiles()
	p.apply(r)
}

// view is the pod's status inputs now, its files read; p.mu must be held
// or the pod not yet shared.
func (p *Provider) view(pj *podJob) jobView {
	r := p.beginRead("", pj, false)
	r.readFiles()
	return r.view
}
