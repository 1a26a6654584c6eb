package mock

import (
	"encoding/json"
	"errors"
	"fmt"
	"net/netip"
	"os"
	"path/filepath"
	"strings"
	"time"

	corev1 "k8s.io/api/core/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
)

// A state directory makes the mock keep its pods across daemon restarts, as
// a real backend keeps running pods when the daemon is killed. Each pod is a
// file, <namespace>_<name>.json, written when CreatePod, UpdatePod and
// DeletePod change what the mock runs, never on a status change: the file
// holds the pod's spec as the mock keeps it, its IP, when it was created
// and the specs UpdatePod handed over since, with their times. Everything
// else (start times, exits, restart counts) follows from the scripts, so a
// restart replays each pod from its creation to now in virtual time (see
// replayClock): running pods keep their start times and restart counts,
// timers resume from the recorded times, and what fell due while the daemon
// was down happens at the time it would have. Fault windows (fail-for) are
// not kept: they start again.

// podFile is what the state directory keeps of one pod.
type podFile struct {
	// Pod is the pod as CreatePod got it, as far as the mock keeps it
	// (see podState.snapshot), without a status.
	Pod *corev1.Pod `json:"pod"`
	// IP is the pod's primary IP, IPs all of them (files from before
	// dual-stack pods have IP only).
	IP  string   `json:"ip"`
	IPs []string `json:"ips,omitempty"`
	// Created is when CreatePod ran, the pod's start time.
	Created time.Time `json:"created"`
	// Updates are the specs UpdatePod handed over since, in order.
	Updates []podUpdate `json:"updates,omitempty"`
}

type podUpdate struct {
	At  time.Time   `json:"at"`
	Pod *corev1.Pod `json:"pod"`
}

// stateDir is a provider's state directory; a nil one keeps nothing.
type stateDir struct{ dir string }

func (s *stateDir) path(namespace, name string) string {
	// Namespaces and names have no "_".
	return filepath.Join(s.dir, namespace+"_"+name+".json")
}

// kept is the pod as the mock keeps it, without its status.
func kept(ps *podState) *corev1.Pod {
	pod := ps.snapshot()
	pod.Status = corev1.PodStatus{}
	return pod
}

// created records a pod CreatePod started; p.mu must be held.
func (s *stateDir) created(ps *podState) error {
	if s == nil {
		return nil
	}
	return s.write(&podFile{Pod: kept(ps), IP: ps.ips[0], IPs: ps.ips, Created: ps.created})
}

// updated records the spec UpdatePod handed over, if it changed what the
// mock keeps; p.mu must be held.
func (s *stateDir) updated(ps *podState) error {
	if s == nil {
		return nil
	}
	f, err := s.read(s.path(ps.pod.namespace, ps.pod.name))
	if err != nil {
		return err
	}
	last := f.Pod
	if n := len(f.Updates); n > 0 {
		last = f.Updates[n-1].Pod
	}
	pod := kept(ps)
	if apiequality.Semantic.DeepEqual(last, pod) {
		return nil
	}
	f.Updates = append(f.Updates, podUpdate{At: ps.now(), Pod: pod})
	return s.write(f)
}

// deleted forgets a pod DeletePod stopped; p.mu must be held.
func (s *stateDir) deleted(ps *podState) error {
	if s == nil {
		return nil
	}
	err := os.Remove(s.path(ps.pod.namespace, ps.pod.name))
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	return err
}

// write replaces the pod's file; a crash leaves the old file or the new one,
// never half of one.
func (s *stateDir) write(f *podFile) error {
	data, err := json.Marshal(f)
	if err != nil {
		return err
	}
	path := s.path(f.Pod.Namespace, f.Pod.Name)
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, data, 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

func (s *stateDir) read(path string) (*podFile, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var f podFile
	if err := json.Unmarshal(data, &f); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if f.Pod == nil || f.Pod.Namespace == "" || f.Pod.Name == "" || f.Created.IsZero() {
		return nil, fmt.Errorf("%s: not a pod file of the mock provider (no pod, namespace, name or created time)", path)
	}
	for _, u := range f.Updates {
		if u.Pod == nil || u.At.IsZero() {
			return nil, fmt.Errorf("%s: an update has no pod or time", path)
		}
	}
	return &f, nil
}

// openStateDir creates dir if needed and restores the pods kept there into
// p, whose clock is real again when it returns. Errors name the file.
func openStateDir(p *Provider, dir string) (*stateDir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	s := &stateDir{dir: dir}
	entries, err := os.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("state directory: %w", err)
	}
	now := time.Now()
	var replays []*replayClock
	// Until every pod is replayed the provider's clock is a replay's.
	defer func() { p.clock = realClock{} }()
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		if strings.HasSuffix(e.Name(), ".json.tmp") {
			// A write the daemon did not finish: the pod's file is intact.
			_ = os.Remove(path)
			continue
		}
		if e.IsDir() || !strings.HasSuffix(e.Name(), ".json") {
			continue
		}
		f, err := s.read(path)
		if err != nil {
			return nil, fmt.Errorf("state directory: %w (remove the file to forget the pod)", err)
		}
		r, err := restore(p, f, now)
		if err != nil {
			return nil, fmt.Errorf("state directory: %s: %w (remove the file to forget the pod)", path, err)
		}
		replays = append(replays, r)
	}
	// Timers start only once every pod is replayed, and not at all for a
	// provider that failed to start.
	p.clock = realClock{}
	for _, r := range replays {
		r.handOver(now)
	}
	return s, nil
}

// restore replays a kept pod from its creation to now and adds it to p.
func restore(p *Provider, f *podFile, now time.Time) (*replayClock, error) {
	scripts, err := parseScripts(f.Pod)
	if err != nil {
		return nil, err
	}
	r := &replayClock{now: f.Created}
	p.clock = r
	ips := f.IPs
	if len(ips) == 0 {
		ips = []string{f.IP}
	}
	ps := newPodState(p, f.Pod, scripts, ips)
	ps.begin()
	for _, u := range f.Updates {
		r.runUntil(u.At)
		ps.update(u.Pod)
	}
	r.runUntil(now)
	put(&p.pods, podKey(f.Pod.Namespace, f.Pod.Name), ps)
	if ip, err := netip.ParseAddr(f.IP); err == nil && ip.Is4() {
		// Later pods get addresses after the restored ones.
		b := ip.As4()
		p.nextIP = max(p.nextIP, uint32(b[2])<<8|uint32(b[3]))
	}
	return r, nil
}
