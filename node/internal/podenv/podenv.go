// Package podenv resolves a pod's environment the way the kubelet does before
// it starts containers, so a provider receives plain values: env and envFrom
// from ConfigMaps and Secrets, downward API fields and resources, service
// link variables, and $(VAR) references in env values, command and args.
// With Lookup.KeepObjectRefs the ConfigMap and Secret references stay, for a
// runtime that reads those objects (copies of them) itself.
package podenv

import (
	"fmt"
	"math"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/validation"
	corev1listers "k8s.io/client-go/listers/core/v1"
)

// Lookup reads the objects a pod's environment refers to. A nil lister makes
// every reference to that kind an error (or, when optional, skipped).
type Lookup struct {
	ConfigMaps corev1listers.ConfigMapLister
	Secrets    corev1listers.SecretLister
	Services   corev1listers.ServiceLister
	// Node, if set, returns the node the pod runs on: a limits.* resource
	// reference of a container without that limit resolves to its
	// allocatable, and status.hostIP(s) of a pod without them to its
	// addresses, as on a kubelet.
	Node func() *corev1.Node
	// KeepObjectRefs leaves env and envFrom references to ConfigMaps and
	// Secrets as written, for a provider that copies those objects to where
	// the pod runs and whose runtime reads them there (so Secret values are
	// not written into the pod it creates). What only this cluster knows is
	// still resolved: downward API fields and resources become plain values
	// and the service link variables are added first, so the runtime's
	// expansion of $(VAR) references, left to it, finds them. The pod's IPs
	// (status.podIP, status.podIPs) stay references: that runtime gives the
	// pod its IP, unknown here when the pod is handed over. The objects are
	// still read: a missing mandatory one is the same error.
	KeepObjectRefs bool
	// ServiceVars, if set, keeps the variables of each service version, so
	// pods share them instead of formatting their own.
	ServiceVars *ServiceVarsMemo
}

// MissingError says a mandatory ConfigMap, Secret or key does not exist. The
// pod cannot start until it does; it may appear later.
type MissingError struct {
	Kind, Namespace, Name, Key string
}

func (e *MissingError) Error() string {
	if e.Key != "" {
		return fmt.Sprintf("couldn't find key %s in %s %s/%s", e.Key, e.Kind, e.Namespace, e.Name)
	}
	return fmt.Sprintf("%s %q not found", strings.ToLower(e.Kind), e.Name)
}

// InvalidError says the pod asks for something that cannot be resolved no
// matter what exists in the cluster.
type InvalidError struct{ Msg string }

func (e *InvalidError) Error() string { return e.Msg }

// Result is a resolved pod and what was skipped on the way.
type Result struct {
	// Pod is a copy of the input with resolved env, no envFrom, and
	// command/args expanded.
	Pod *corev1.Pod
	// InvalidKeys are ConfigMap/Secret keys envFrom skipped because they are
	// not valid variable names (the kubelet reports them in an Event).
	InvalidKeys []string
	// SkippedOptional are the optional references skipped because their
	// ConfigMap, Secret or key does not exist, each once.
	SkippedOptional []MissingError
}

// masterServices are the services whose variables every pod gets, even with
// enableServiceLinks off, as the kubelet does.
const masterServiceNamespace = corev1.NamespaceDefault

var masterServices = map[string]bool{"kubernetes": true}

// Resolve returns a copy of pod with every container's environment resolved.
func (l Lookup) Resolve(pod *corev1.Pod) (*Result, error) {
	serviceEnv, err := l.serviceEnv(pod)
	if err != nil {
		return nil, err
	}
	out := pod.DeepCopy()
	r := &Result{Pod: out}
	objects := newObjectCache(l, pod.Namespace)
	resolve := func(c *corev1.Container) error {
		own, invalid, err := resolveContainer(pod, c, serviceEnv, objects)
		if err != nil {
			return fmt.Errorf("container %s: %w", c.Name, err)
		}
		r.InvalidKeys = append(r.InvalidKeys, invalid...)
		if l.KeepObjectRefs {
			if c.Env, err = keptEnv(pod, c, serviceEnv, own, objects); err != nil {
				return fmt.Errorf("container %s: %w", c.Name, err)
			}
			return nil
		}
		env := withServices(own, serviceEnv)
		c.Env, c.EnvFrom = env, nil
		lookup := mapping(env)
		for i := range c.Command {
			c.Command[i] = Expand(c.Command[i], lookup)
		}
		for i := range c.Args {
			c.Args[i] = Expand(c.Args[i], lookup)
		}
		return nil
	}
	for i := range out.Spec.InitContainers {
		if err := resolve(&out.Spec.InitContainers[i]); err != nil {
			return nil, err
		}
	}
	for i := range out.Spec.Containers {
		if err := resolve(&out.Spec.Containers[i]); err != nil {
			return nil, err
		}
	}
	for i := range out.Spec.EphemeralContainers {
		if err := resolve((*corev1.Container)(&out.Spec.EphemeralContainers[i].EphemeralContainerCommon)); err != nil {
			return nil, err
		}
	}
	r.SkippedOptional = objects.skipped
	return r, nil
}

// envList keeps variables in the order they were first defined, with the
// value of their last definition: later sources override earlier ones.
type envList struct {
	vars  []corev1.EnvVar
	index map[string]int
}

func (e *envList) set(name, value string) {
	if e.index == nil {
		e.index = map[string]int{}
	}
	if i, ok := e.index[name]; ok {
		e.vars[i].Value = value
		return
	}
	e.index[name] = len(e.vars)
	e.vars = append(e.vars, corev1.EnvVar{Name: name, Value: value})
}

func (e *envList) get(name string) (string, bool) {
	i, ok := e.index[name]
	if !ok {
		return "", false
	}
	return e.vars[i].Value, true
}

// resolveContainer returns the variables the container defines itself
// (envFrom, then env), without the service link variables.
func resolveContainer(pod *corev1.Pod, c *corev1.Container, serviceEnv []corev1.EnvVar, objects *objectCache) (*envList, []string, error) {
	var env envList
	var invalid []string

	for _, from := range c.EnvFrom {
		data, err := objects.envFromData(from)
		if err != nil {
			return nil, nil, err
		}
		keys := make([]string, 0, len(data))
		for k := range data {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			name := from.Prefix + k
			if len(validation.IsRelaxedEnvVarName(name)) > 0 {
				invalid = append(invalid, name)
				continue
			}
			env.set(name, data[k])
		}
	}

	services := envList{}
	for _, v := range serviceEnv {
		services.set(v.Name, v.Value)
	}
	lookup := func(name string) (string, bool) {
		if v, ok := env.get(name); ok {
			return v, true
		}
		return services.get(name)
	}

	for _, v := range c.Env {
		value, skip, err := resolveVar(pod, c, v, lookup, objects)
		if err != nil {
			return nil, nil, err
		}
		if !skip {
			env.set(v.Name, value)
		}
	}
	return &env, invalid, nil
}

// withServices appends the service link variables the container does not
// define itself: they come last and never override the pod's own.
func withServices(own *envList, serviceEnv []corev1.EnvVar) []corev1.EnvVar {
	for _, v := range serviceEnv {
		if _, ok := own.get(v.Name); !ok {
			own.set(v.Name, v.Value)
		}
	}
	return own.vars
}

// podIPField are the downward API fields of the pod's IPs.
var podIPField = map[string]bool{"status.podIP": true, "status.podIPs": true}

// keptEnv is c's env for Lookup.KeepObjectRefs: the service link variables c
// does not define itself, then c's env with downward API references, but to
// the pod's IPs, replaced by their values. Those values are escaped ($ as $$)
// so that the runtime's expansion gives them back as they are, as the
// kubelet never expands them.
func keptEnv(pod *corev1.Pod, c *corev1.Container, serviceEnv []corev1.EnvVar, own *envList, objects *objectCache) ([]corev1.EnvVar, error) {
	escape := func(s string) string { return strings.ReplaceAll(s, "$", "$$") }
	var out []corev1.EnvVar
	for _, v := range serviceEnv {
		if _, ok := own.get(v.Name); !ok {
			out = append(out, corev1.EnvVar{Name: v.Name, Value: escape(v.Value)})
		}
	}
	for _, v := range c.Env {
		if from := v.ValueFrom; from != nil && (from.FieldRef != nil && !podIPField[from.FieldRef.FieldPath] || from.ResourceFieldRef != nil) {
			value, _, err := resolveVar(pod, c, v, nil, objects)
			if err != nil {
				return nil, err
			}
			v = corev1.EnvVar{Name: v.Name, Value: escape(value)}
		}
		out = append(out, v)
	}
	return out, nil
}

// resolveVar returns the value of one env entry, or skip for an optional
// reference to something that does not exist.
func resolveVar(pod *corev1.Pod, c *corev1.Container, v corev1.EnvVar, lookup func(string) (string, bool), objects *objectCache) (value string, skip bool, err error) {
	from := v.ValueFrom
	switch {
	case from == nil:
		return Expand(v.Value, lookup), false, nil
	case from.FieldRef != nil:
		value, err := FieldValue(pod, from.FieldRef.FieldPath, objects.node)
		return value, false, err
	case from.ResourceFieldRef != nil:
		var allocatable corev1.ResourceList
		if node := objects.node; node != nil {
			allocatable = node.Status.Allocatable
			if len(allocatable) == 0 {
				allocatable = node.Status.Capacity
			}
		}
		target, err := resourceContainer(pod, c, from.ResourceFieldRef.ContainerName)
		if err != nil {
			return "", false, fmt.Errorf("env %s: %w", v.Name, err)
		}
		value, err := ResourceValue(target, from.ResourceFieldRef, allocatable)
		return value, false, err
	case from.ConfigMapKeyRef != nil:
		return objects.keyValue("ConfigMap", from.ConfigMapKeyRef.Name, from.ConfigMapKeyRef.Key, from.ConfigMapKeyRef.Optional)
	case from.SecretKeyRef != nil:
		return objects.keyValue("Secret", from.SecretKeyRef.Name, from.SecretKeyRef.Key, from.SecretKeyRef.Optional)
	}
	return "", false, &InvalidError{Msg: fmt.Sprintf("env %s: unsupported valueFrom source", v.Name)}
}

// resourceContainer returns the container a resourceFieldRef names: c when
// the name is empty or its own, else the pod's container (or init container)
// of that name.
func resourceContainer(pod *corev1.Pod, c *corev1.Container, name string) (*corev1.Container, error) {
	if name == "" || name == c.Name {
		return c, nil
	}
	for _, list := range [][]corev1.Container{pod.Spec.Containers, pod.Spec.InitContainers} {
		for i := range list {
			if list[i].Name == name {
				return &list[i], nil
			}
		}
	}
	return nil, &InvalidError{Msg: fmt.Sprintf("resourceFieldRef: container %q not found in the pod", name)}
}

// objectCache fetches each ConfigMap and Secret of a pod once per resolution.
type objectCache struct {
	l         Lookup
	namespace string
	data      map[string]map[string]string
	missing   map[string]bool
	// node is Lookup.Node's answer, read once per pod.
	node *corev1.Node
	// skipped are the missing optional references met so far, each once.
	skipped []MissingError
}

// skip records a missing optional reference.
func (o *objectCache) skip(kind, name, key string) {
	m := MissingError{Kind: kind, Namespace: o.namespace, Name: name, Key: key}
	for _, s := range o.skipped {
		if s == m {
			return
		}
	}
	o.skipped = append(o.skipped, m)
}

func newObjectCache(l Lookup, namespace string) *objectCache {
	o := &objectCache{l: l, namespace: namespace, data: map[string]map[string]string{}, missing: map[string]bool{}}
	if l.Node != nil {
		o.node = l.Node()
	}
	return o
}

// get returns the data of a ConfigMap or Secret, or nil if it does not exist.
func (o *objectCache) get(kind, name string) (map[string]string, error) {
	id := kind + "/" + name
	if d, ok := o.data[id]; ok {
		return d, nil
	}
	if o.missing[id] {
		return nil, nil
	}
	obj, err := Objects{ConfigMaps: o.l.ConfigMaps, Secrets: o.l.Secrets}.Get(kind, o.namespace, name, false)
	if err != nil {
		return nil, err
	}
	if obj == nil {
		o.missing[id] = true
		return nil, nil
	}
	data := obj.Data
	o.data[id] = data
	return data, nil
}

func (o *objectCache) envFromData(from corev1.EnvFromSource) (map[string]string, error) {
	var kind, name string
	var optional *bool
	switch {
	case from.ConfigMapRef != nil:
		kind, name, optional = "ConfigMap", from.ConfigMapRef.Name, from.ConfigMapRef.Optional
	case from.SecretRef != nil:
		kind, name, optional = "Secret", from.SecretRef.Name, from.SecretRef.Optional
	default:
		return nil, &InvalidError{Msg: "envFrom: unsupported source"}
	}
	data, err := o.get(kind, name)
	if err != nil {
		return nil, err
	}
	if data == nil {
		if optional != nil && *optional {
			o.skip(kind, name, "")
			return nil, nil
		}
		return nil, &MissingError{Kind: kind, Namespace: o.namespace, Name: name}
	}
	return data, nil
}

func (o *objectCache) keyValue(kind, name, key string, optional *bool) (string, bool, error) {
	isOptional := optional != nil && *optional
	data, err := o.get(kind, name)
	if err != nil {
		return "", false, err
	}
	if data == nil {
		if isOptional {
			o.skip(kind, name, "")
			return "", true, nil
		}
		return "", false, &MissingError{Kind: kind, Namespace: o.namespace, Name: name}
	}
	v, ok := data[key]
	if !ok {
		if isOptional {
			o.skip(kind, name, key)
			return "", true, nil
		}
		return "", false, &MissingError{Kind: kind, Namespace: o.namespace, Name: name, Key: key}
	}
	return v, false, nil
}

// FieldValue resolves a downward API field path of the pod. The host IPs of a
// pod whose status has none yet (the provider has not reported it) are those
// of node, if given.
func FieldValue(pod *corev1.Pod, path string, node *corev1.Node) (string, error) {
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		if pod.Status.HostIP == "" {
			if ips := NodeHostIPs(node); len(ips) > 0 {
				return ips[0], nil
			}
		}
		return pod.Status.HostIP, nil
	case "status.hostIPs":
		if len(pod.Status.HostIPs) == 0 {
			return strings.Join(NodeHostIPs(node), ","), nil
		}
		return joinIPs(pod.Status.HostIPs, func(ip corev1.HostIP) string { return ip.IP }), nil
	case "status.podIP":
		return pod.Status.PodIP, nil
	case "status.podIPs":
		return joinIPs(pod.Status.PodIPs, func(ip corev1.PodIP) string { return ip.IP }), nil
	}
	return "", &InvalidError{Msg: fmt.Sprintf("unsupported fieldPath: %s", path)}
}

// NodeHostIPs returns the addresses a kubelet gives its pods as host IPs: the
// node's first InternalIP of each IP family (its ExternalIPs when it has no
// InternalIP), in the node's order.
func NodeHostIPs(node *corev1.Node) []string {
	if node == nil {
		return nil
	}
	for _, t := range []corev1.NodeAddressType{corev1.NodeInternalIP, corev1.NodeExternalIP} {
		var ips []string
		var v4, v6 bool
		for _, a := range node.Status.Addresses {
			ip := net.ParseIP(a.Address)
			if a.Type != t || ip == nil {
				continue
			}
			if is4 := ip.To4() != nil; is4 && !v4 {
				v4 = true
				ips = append(ips, a.Address)
			} else if !is4 && !v6 {
				v6 = true
				ips = append(ips, a.Address)
			}
		}
		if len(ips) > 0 {
			return ips
		}
	}
	return nil
}

// subscript parses prefix['key'].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"['")
	if !ok {
		return "", false
	}
	return strings.CutSuffix(rest, "']")
}

func joinIPs[T any](ips []T, ip func(T) string) string {
	s := make([]string, len(ips))
	for i := range ips {
		s[i] = ip(ips[i])
	}
	return strings.Join(s, ",")
}

// ResourceValue resolves a downward API resource of the container: its
// request or limit divided by the divisor, rounded up. A limit the container
// does not set is the node's allocatable amount, as the kubelet resolves it
// (0 when allocatable is nil).
func ResourceValue(c *corev1.Container, ref *corev1.ResourceFieldSelector, allocatable corev1.ResourceList) (string, error) {
	var q resource.Quantity
	var name string
	switch {
	case strings.HasPrefix(ref.Resource, "limits."):
		name = strings.TrimPrefix(ref.Resource, "limits.")
		var ok bool
		if q, ok = c.Resources.Limits[corev1.ResourceName(name)]; !ok {
			q = allocatable[corev1.ResourceName(name)]
		}
	case strings.HasPrefix(ref.Resource, "requests."):
		name = strings.TrimPrefix(ref.Resource, "requests.")
		q = c.Resources.Requests[corev1.ResourceName(name)]
	default:
		return "", &InvalidError{Msg: fmt.Sprintf("unsupported container resource: %s", ref.Resource)}
	}
	divisor := ref.Divisor
	if divisor.IsZero() {
		divisor = resource.MustParse("1")
	}
	switch corev1.ResourceName(name) {
	case corev1.ResourceCPU:
		return strconv.FormatInt(int64(math.Ceil(float64(q.MilliValue())/float64(divisor.MilliValue()))), 10), nil
	case corev1.ResourceMemory, corev1.ResourceEphemeralStorage:
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	if strings.HasPrefix(name, corev1.ResourceHugePagesPrefix) {
		return strconv.FormatInt(int64(math.Ceil(float64(q.Value())/float64(divisor.Value()))), 10), nil
	}
	return "", &InvalidError{Msg: fmt.Sprintf("unsupported container resource: %s", ref.Resource)}
}

// serviceEnv returns the service link variables of the pod, sorted by
// service name: its namespace's services when enableServiceLinks is not
// false, and the master services of the default namespace always.
func (l Lookup) serviceEnv(pod *corev1.Pod) ([]corev1.EnvVar, error) {
	if l.Services == nil {
		return nil, nil
	}
	byName := map[string]*corev1.Service{}
	if pod.Spec.EnableServiceLinks == nil || *pod.Spec.EnableServiceLinks {
		services, err := l.Services.Services(pod.Namespace).List(everything)
		if err != nil {
			return nil, err
		}
		for _, s := range services {
			if hasClusterIP(s) {
				byName[s.Name] = s
			}
		}
	}
	for name := range masterServices {
		if _, ok := byName[name]; ok {
			continue
		}
		s, err := l.Services.Services(masterServiceNamespace).Get(name)
		if apierrors.IsNotFound(err) {
			continue
		}
		if err != nil {
			return nil, err
		}
		if hasClusterIP(s) {
			byName[name] = s
		}
	}
	names := make([]string, 0, len(byName))
	for n := range byName {
		names = append(names, n)
	}
	sort.Strings(names)
	var env []corev1.EnvVar
	for _, n := range names {
		env = append(env, l.ServiceVars.get(byName[n])...)
	}
	return env, nil
}

// ServiceVarsMemo remembers ServiceVars per service version: every pod of
// a namespace gets the same service variables, and at 10,000 pods
// formatting them anew for each was megabytes of identical strings. It is
// safe for concurrent use; the zero value is ready.
type ServiceVarsMemo struct {
	mu sync.Mutex
	m  map[types.UID]memoizedVars
}

type memoizedVars struct {
	resourceVersion string
	vars            []corev1.EnvVar
}

// maxMemoizedServices bounds the memo: past it, it starts over, which also
// forgets deleted services.
const maxMemoizedServices = 4096

// get returns ServiceVars(s), shared with other callers (not to be
// modified); a nil memo computes them.
func (m *ServiceVarsMemo) get(s *corev1.Service) []corev1.EnvVar {
	if m == nil || s.UID == "" || s.ResourceVersion == "" {
		return ServiceVars(s) // nothing to tell versions apart by
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if e, ok := m.m[s.UID]; ok && e.resourceVersion == s.ResourceVersion {
		return e.vars
	}
	if m.m == nil || len(m.m) >= maxMemoizedServices {
		m.m = map[types.UID]memoizedVars{}
	}
	vars := ServiceVars(s)
	m.m[s.UID] = memoizedVars{resourceVersion: s.ResourceVersion, vars: vars}
	return vars
}

func hasClusterIP(s *corev1.Service) bool {
	return s.Spec.ClusterIP != "" && s.Spec.ClusterIP != corev1.ClusterIPNone
}

// ServiceVars returns the variables a service contributes to pods: its host
// and ports, and the Docker-link style variables.
func ServiceVars(s *corev1.Service) []corev1.EnvVar {
	prefix := strings.ToUpper(strings.ReplaceAll(s.Name, "-", "_"))
	ip := s.Spec.ClusterIP
	vars := []corev1.EnvVar{{Name: prefix + "_SERVICE_HOST", Value: ip}}
	if len(s.Spec.Ports) == 0 {
		return vars
	}
	vars = append(vars, corev1.EnvVar{Name: prefix + "_SERVICE_PORT", Value: strconv.Itoa(int(s.Spec.Ports[0].Port))})
	for _, p := range s.Spec.Ports {
		if p.Name != "" {
			vars = append(vars, corev1.EnvVar{
				Name:  prefix + "_SERVICE_PORT_" + strings.ToUpper(strings.ReplaceAll(p.Name, "-", "_")),
				Value: strconv.Itoa(int(p.Port)),
			})
		}
	}
	for i, p := range s.Spec.Ports {
		proto := strings.ToLower(string(p.Protocol))
		if proto == "" {
			proto = "tcp"
		}
		port := strconv.Itoa(int(p.Port))
		url := proto + "://" + joinHostPort(ip, port)
		if i == 0 {
			vars = append(vars, corev1.EnvVar{Name: prefix + "_PORT", Value: url})
		}
		pp := prefix + "_PORT_" + port + "_" + strings.ToUpper(proto)
		vars = append(vars,
			corev1.EnvVar{Name: pp, Value: url},
			corev1.EnvVar{Name: pp + "_PROTO", Value: proto},
			corev1.EnvVar{Name: pp + "_PORT", Value: port},
			corev1.EnvVar{Name: pp + "_ADDR", Value: ip},
		)
	}
	return vars
}

func joinHostPort(host, port string) string {
	if strings.Contains(host, ":") {
		return "[" + host + "]:" + port
	}
	return host + ":" + port
}

func mapping(env []corev1.EnvVar) func(string) (string, bool) {
	m := make(map[string]string, len(env))
	for _, v := range env {
		m[v.Name] = v.Value
	}
	return func(name string) (string, bool) {
		v, ok := m[name]
		return v, ok
	}
}
