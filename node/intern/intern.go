// Package intern keeps one instance of the values that many pods (and Nodes) repeat,
// so that a process holding thousands of pods holds each such value once:
// strings, resource lists, label and annotation maps, volume sources,
// tolerations, environment lists, security contexts, affinity and probes.
// The pods of one Deployment differ in little more than their names, UIDs,
// IPs and times.
//
// The tables are an Interner's, not the package's: whoever makes one
// (New) decides what shares it, typically the pod informers of a
// process's nodes (nodeutil.TrimPodsWith) and its providers. Strings are
// the exception: String hands out the runtime's canonical instance
// (package unique), which the runtime drops once unused.
//
// Shared values are read-only, as any object from an informer's cache is:
// whoever changes one copies it first.
package intern

import (
	"slices"
	"strconv"
	"sync"
	"unique"

	corev1 "k8s.io/api/core/v1"
)

// maxKey is the longest key a table keeps: longer values (a large
// annotation) are seldom repeated, and the table would hold a second copy.
const maxKey = 4096

// table hands out one instance of each distinct value it is given, by a
// key that is equal exactly when the values are. It keeps at most max
// values; when full it starts over, so values no pod has any more are not
// kept for ever.
type table[V any] struct {
	mu     sync.Mutex
	values map[string]V
	max    int
}

// newTable returns an empty table that keeps at most max values.
func newTable[V any](max int) *table[V] {
	return &table[V]{values: make(map[string]V), max: max}
}

// share returns the instance kept under key, v itself (now kept) the first
// time; v when t is nil (an Interner that shares strings only). Only a
// value it keeps copies the key.
func (t *table[V]) share(key []byte, v V) V {
	if t == nil || len(key) > maxKey {
		return v
	}
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.values[string(key)]; ok {
		return s
	}
	if len(t.values) >= t.max {
		clear(t.values)
	}
	t.values[string(key)] = v
	return v
}

// Interner holds the tables of shared values. It is safe for concurrent
// use. Whoever makes one owns what it keeps: the informers of a process's
// nodes and its providers share one, so that a provider's copy of a value
// is the cache's instance too. A nil or zero Interner shares strings
// only.
type Interner struct {
	resourceLists *table[corev1.ResourceList]
	stringMaps    *table[map[string]string]
	volumeSources *table[corev1.VolumeSource]
	tolerations   *table[[]corev1.Toleration]
	envVars       *table[[]corev1.EnvVar]
	// What the pods of a Deployment repeat from its template, nil in most
	// other pods: each is a few allocations when decoded.
	podSecurityContexts *table[*corev1.PodSecurityContext]
	securityContexts    *table[*corev1.SecurityContext]
	affinities          *table[*corev1.Affinity]
	probes              *table[*corev1.Probe]
}

// stringsOnly is what a nil Interner stands for in Pod: no tables, so
// only String shares. It is never written, and holds nothing.
var stringsOnly Interner

// New returns an Interner with empty tables, each bounded (4,096 values
// of the common kinds, 1,024 of the rarer ones) so that what it keeps
// stays small whatever the pods.
func New() *Interner {
	return &Interner{
		resourceLists:       newTable[corev1.ResourceList](4096),
		stringMaps:          newTable[map[string]string](4096),
		volumeSources:       newTable[corev1.VolumeSource](4096),
		tolerations:         newTable[[]corev1.Toleration](1024),
		envVars:             newTable[[]corev1.EnvVar](1024),
		podSecurityContexts: newTable[*corev1.PodSecurityContext](1024),
		securityContexts:    newTable[*corev1.SecurityContext](1024),
		affinities:          newTable[*corev1.Affinity](1024),
		probes:              newTable[*corev1.Probe](1024),
	}
}

// String returns the canonical instance of s. Strings are not kept in an
// Interner's tables but by package unique, weakly: one no pod holds any
// more is dropped at a collection, and every Interner hands out the same
// instance.
func String(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// ResourceList returns the instance of a list equal to l: equal
// quantities written otherwise (0.1 and 100m) are the same list.
func (in *Interner) ResourceList(l corev1.ResourceList) corev1.ResourceList {
	if in == nil || in.resourceLists == nil || len(l) == 0 {
		return l
	}
	var names [8]string
	var buf [256]byte
	var number [64]byte
	key := buf[:0]
	for _, name := range sortedKeys(names[:0], l) {
		q := l[corev1.ResourceName(name)]
		digits, exponent := q.AsCanonicalBytes(number[:0])
		key = appendField(key, name)
		key = appendField(key, digits)
		key = strconv.AppendInt(key, int64(exponent), 10)
		key = appendField(key, string(q.Format))
	}
	return in.resourceLists.share(key, l)
}

// Requirements shares r's lists in place.
func (in *Interner) Requirements(r *corev1.ResourceRequirements) {
	if r != nil {
		r.Requests, r.Limits = in.ResourceList(r.Requests), in.ResourceList(r.Limits)
	}
}

// StringMap returns the instance of a map equal to m (labels,
// annotations, a node selector).
func (in *Interner) StringMap(m map[string]string) map[string]string {
	if in == nil || in.stringMaps == nil || len(m) == 0 {
		return m
	}
	var names [8]string
	var buf [256]byte
	key := buf[:0]
	for _, k := range sortedKeys(names[:0], m) {
		key = appendField(key, k)
		key = appendField(key, m[k])
	}
	return in.stringMaps.share(key, m)
}

// VolumeSource returns a source equal to s whose pointers are the shared
// instances: every pod of a namespace mounts the same token projection.
// The key is the source's protobuf encoding, equal exactly when the sources
// are; the generated methods are called on the concrete types so that the
// buffers stay on the stack.
func (in *Interner) VolumeSource(s corev1.VolumeSource) corev1.VolumeSource {
	if in == nil || in.volumeSources == nil {
		return s
	}
	var buf [256]byte
	n := s.Size()
	if n > len(buf) {
		return s
	}
	if _, err := s.MarshalToSizedBuffer(buf[:n]); err != nil {
		return s
	}
	return in.volumeSources.share(buf[:n], s)
}

// Tolerations returns the instance of a list equal to l.
func (in *Interner) Tolerations(l []corev1.Toleration) []corev1.Toleration {
	if in == nil {
		return l
	}
	return shareList(in.tolerations, l)
}

// EnvVars returns the instance of a list equal to l: a
// Deployment's containers repeat their template's variables, and every
// container of a namespace gets the same service variables.
func (in *Interner) EnvVars(l []corev1.EnvVar) []corev1.EnvVar {
	if in == nil {
		return l
	}
	return shareList(in.envVars, l)
}

// shareList returns the instance in t of a list equal to l, keyed by its
// elements' protobuf encodings, each length first; l itself when empty or
// when its key would be longer than maxKey.
func shareList[T any, P interface {
	*T
	message
}](t *table[[]T], l []T) []T {
	if t == nil || len(l) == 0 {
		return l
	}
	var buf [1024]byte
	key := buf[:0]
	for i := range l {
		e := P(&l[i])
		n := e.Size()
		if len(key)+n > maxKey {
			return l
		}
		key = strconv.AppendInt(key, int64(n), 10)
		key = append(key, ':')
		start := len(key)
		key = slices.Grow(key, n)[:start+n]
		if _, err := e.MarshalToSizedBuffer(key[start:]); err != nil {
			return l
		}
	}
	return t.share(key, l)
}

// message is a generated protobuf message of the core API.
type message interface {
	Size() int
	MarshalToSizedBuffer([]byte) (int, error)
}

// sharePointer returns the instance in t of a value equal to *p, keyed by
// its protobuf encoding; p itself for nil or without a table.
func sharePointer[T any, P interface {
	*T
	message
}](t *table[P], p P) P {
	if t == nil || p == nil {
		return p
	}
	n := p.Size()
	if n > maxKey {
		return p
	}
	key := make([]byte, n)
	if _, err := p.MarshalToSizedBuffer(key); err != nil {
		return p
	}
	return t.share(key, p)
}

// sortedKeys appends m's keys to into, sorted.
func sortedKeys[K ~string, V any](into []string, m map[K]V) []string {
	for k := range m {
		into = append(into, string(k))
	}
	slices.Sort(into)
	return into
}

// appendField appends s length-first, so that no two sequences of fields
// make the same key.
func appendField[S string | []byte](b []byte, s S) []byte {
	b = strconv.AppendInt(b, int64(len(s)), 10)
	b = append(b, ':')
	return append(b, s...)
}
