// Package intern keeps one instance of the values that many pods repeat,
// so that a process holding thousands of pods holds each such value once:
// strings, resource lists, label and annotation maps, volume sources,
// tolerations, environment lists, security contexts, affinity and probes.
// The pods of one Deployment differ in little more than their names, UIDs,
// IPs and times.
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
// time. Only a value it keeps copies the key.
func (t *table[V]) share(key []byte, v V) V {
	if len(key) > maxKey {
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

// The process's tables: the informers of all its nodes and its providers
// share them, so a provider's copy of a value is the cache's instance too.
var (
	resourceLists = newTable[corev1.ResourceList](4096)
	stringMaps    = newTable[map[string]string](4096)
	volumeSources = newTable[corev1.VolumeSource](4096)
	tolerations   = newTable[[]corev1.Toleration](1024)
	envVars       = newTable[[]corev1.EnvVar](1024)
	// What the pods of a Deployment repeat from its template, nil in most
	// other pods: each is a few allocations when decoded.
	podSecurityContexts = newTable[*corev1.PodSecurityContext](1024)
	securityContexts    = newTable[*corev1.SecurityContext](1024)
	affinities          = newTable[*corev1.Affinity](1024)
	probes              = newTable[*corev1.Probe](1024)
)

// String returns the process's instance of s. Strings are kept weakly
// (package unique): one no pod holds any more is dropped at a collection.
func String(s string) string {
	if s == "" {
		return s
	}
	return unique.Make(s).Value()
}

// ResourceList returns the process's instance of a list equal to l: equal
// quantities written otherwise (0.1 and 100m) are the same list.
func ResourceList(l corev1.ResourceList) corev1.ResourceList {
	if len(l) == 0 {
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
	return resourceLists.share(key, l)
}

// Requirements shares r's lists in place.
func Requirements(r *corev1.ResourceRequirements) {
	if r != nil {
		r.Requests, r.Limits = ResourceList(r.Requests), ResourceList(r.Limits)
	}
}

// StringMap returns the process's instance of a map equal to m (labels,
// annotations, a node selector).
func StringMap(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	var names [8]string
	var buf [256]byte
	key := buf[:0]
	for _, k := range sortedKeys(names[:0], m) {
		key = appendField(key, k)
		key = appendField(key, m[k])
	}
	return stringMaps.share(key, m)
}

// VolumeSource returns a source equal to s whose pointers are the process's
// instances: every pod of a namespace mounts the same token projection.
// The key is the source's protobuf encoding, equal exactly when the sources
// are; the generated methods are called on the concrete types so that the
// buffers stay on the stack.
func VolumeSource(s corev1.VolumeSource) corev1.VolumeSource {
	var buf [256]byte
	n := s.Size()
	if n > len(buf) {
		return s
	}
	if _, err := s.MarshalToSizedBuffer(buf[:n]); err != nil {
		return s
	}
	return volumeSources.share(buf[:n], s)
}

// Tolerations returns the process's instance of a list equal to l.
func Tolerations(l []corev1.Toleration) []corev1.Toleration {
	return shareList(tolerations, l)
}

// EnvVars returns the process's instance of a list equal to l: a
// Deployment's containers repeat their template's variables, and every
// container of a namespace gets the same service variables.
func EnvVars(l []corev1.EnvVar) []corev1.EnvVar {
	return shareList(envVars, l)
}

// shareList returns the instance in t of a list equal to l, keyed by its
// elements' protobuf encodings, each length first; l itself when empty or
// when its key would be longer than maxKey.
func shareList[T any, P interface {
	*T
	message
}](t *table[[]T], l []T) []T {
	if len(l) == 0 {
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
// its protobuf encoding; nil for nil.
func sharePointer[T any, P interface {
	*T
	message
}](t *table[P], p P) P {
	if p == nil {
		return nil
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
