// Package podvolumes owns what the pod controller keeps of its pods'
// volumes: a digest of the contents last handed to the provider per pod,
// and the ConfigMaps and Secrets they were read from, so that unchanged
// contents are not handed over again and a changed source reaches the pods
// that read it.
package podvolumes

import (
	"context"
	"crypto/sha256"
	"errors"
	"hash/fnv"
	"slices"
	"strings"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/vkubelet/virtual-kubelet/node/internal/perpod"
	"github.com/vkubelet/virtual-kubelet/node/volume"
)

// Config is what the manager needs from the node.
type Config struct {
	// Resolver reads the volumes' contents.
	Resolver volume.Resolver
	// Set hands a pod's contents to the provider.
	Set func(ctx context.Context, pod *corev1.Pod, contents *volume.Contents) error
	// RefreshAt asks for the pod of key to be brought up to date at at (a
	// token due for renewal).
	RefreshAt func(key string, at time.Time)
}

// Manager resolves and delivers pods' volumes; it is safe for concurrent
// use.
type Manager struct {
	cfg Config
	// locks serialise resolving and delivering per pod (striped by key),
	// so that two workers cannot hand over older contents after newer ones,
	// nor deliver to a pod that ended meanwhile.
	locks [64]sync.Mutex

	mu sync.Mutex
	// delivered is what the provider was last given, per pod key.
	delivered map[string]delivered
}

// delivered is what the manager keeps of the contents it handed over: a
// digest, not the files.
type delivered struct {
	uid     types.UID
	sum     [sha256.Size]byte
	sources []string
}

// New returns a manager.
func New(cfg Config) *Manager {
	return &Manager{cfg: cfg, delivered: map[string]delivered{}}
}

func (m *Manager) lock(key string) *sync.Mutex {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return &m.locks[h.Sum32()%uint32(len(m.locks))]
}

// Set resolves the volumes of pod, of key, and hands them to the provider
// (with forProvider, the pod as the provider gets it) if they changed.
func (m *Manager) Set(ctx context.Context, key string, pod, forProvider *corev1.Pod) error {
	l := m.lock(key)
	l.Lock()
	defer l.Unlock()
	return m.setLocked(ctx, key, pod, forProvider)
}

// Refresh brings the contents of a pod the provider was given up to date;
// a pod never delivered to (or ended) is left to Set.
func (m *Manager) Refresh(ctx context.Context, key string, pod *corev1.Pod) error {
	l := m.lock(key)
	l.Lock()
	defer l.Unlock()
	m.mu.Lock()
	prev, had := m.delivered[key]
	m.mu.Unlock()
	if !had || prev.uid != pod.UID {
		return nil
	}
	return m.setLocked(ctx, key, pod, pod)
}

func (m *Manager) setLocked(ctx context.Context, key string, pod, forProvider *corev1.Pod) error {
	contents, err := m.cfg.Resolver.Resolve(ctx, pod)
	if err != nil {
		return err
	}
	sum := contents.Sum()
	m.mu.Lock()
	prev, had := m.delivered[key]
	m.mu.Unlock()
	if !had || prev.uid != pod.UID || prev.sum != sum {
		if err := m.cfg.Set(ctx, forProvider, contents); err != nil {
			return err
		}
	}
	m.mu.Lock()
	m.delivered[key] = delivered{uid: pod.UID, sum: sum, sources: contents.Sources}
	m.mu.Unlock()
	if had && prev.uid != pod.UID {
		m.forgetTokens(prev.uid)
	}
	if !contents.RefreshAt.IsZero() && m.cfg.RefreshAt != nil {
		m.cfg.RefreshAt(key, contents.RefreshAt)
	}
	return nil
}

// Readers are the keys, in namespace, of the pods whose volumes read
// source ("ConfigMap/name" or "Secret/name").
func (m *Manager) Readers(namespace, source string) []string {
	prefix := namespace + "/"
	var keys []string
	m.mu.Lock()
	defer m.mu.Unlock()
	for key, d := range m.delivered {
		if strings.HasPrefix(key, prefix) && slices.Contains(d.sources, source) {
			keys = append(keys, key)
		}
	}
	return keys
}

// PodEnded drops what is kept of a pod replaced or gone, its tokens
// included; a finished pod's contents stay while its object does.
func (m *Manager) PodEnded(key string, end perpod.End) {
	if end == perpod.Finished {
		return
	}
	l := m.lock(key)
	l.Lock()
	defer l.Unlock()
	m.mu.Lock()
	prev, had := m.delivered[key]
	delete(m.delivered, key)
	m.mu.Unlock()
	if had {
		m.forgetTokens(prev.uid)
	}
}

func (m *Manager) forgetTokens(uid types.UID) {
	if m.cfg.Resolver.Tokens != nil {
		m.cfg.Resolver.Tokens.Forget(uid)
	}
}

// Len is the number of pods whose contents are kept.
func (m *Manager) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.delivered)
}

// IsConfigError reports whether err says a volume cannot be resolved from
// what exists in the cluster, rather than that reading it failed.
func IsConfigError(err error) bool {
	var missing *volume.MissingError
	var invalid *volume.InvalidError
	return errors.As(err, &missing) || errors.As(err, &invalid)
}
