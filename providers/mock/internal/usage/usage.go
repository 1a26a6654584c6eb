// Package usage reads kwok's ResourceUsage and ClusterResourceUsage objects
// (kwok.x-k8s.io/v1alpha1, as kwok v0.8.0 defines them) and works out the
// CPU and memory a pod's containers use: a constant quantity or a CEL
// expression over the pod, its node and the container, run by
// github.com/google/cel-go with a cost limit and a deadline.
//
// The subset served is kwok's documented one for these kinds: the
// variables pod, node and container, and the functions Now, Rand,
// SinceSecond, UnixSecond and Quantity. Usage and CumulativeUsage are
// kwok's for Metric objects only and are refused here, as kwok refuses
// them; Metric objects are passed over (the mock serves /metrics/resource
// from its own stats).
package usage

import (
	"encoding/json"
	"fmt"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	sigsjson "sigs.k8s.io/json"

	"github.com/vkubelet/virtual-kubelet/providers/mock/internal/stage"
)

// The kinds this package reads.
const (
	// KindResourceUsage is the usage of one pod, named as the pod.
	KindResourceUsage = "ResourceUsage"
	// KindClusterResourceUsage is the usage of the pods its selector
	// matches.
	KindClusterResourceUsage = "ClusterResourceUsage"
	// KindMetric is kwok's simulated metrics endpoint: passed over, as
	// the mock's own stats serve /metrics/resource.
	KindMetric = "Metric"
)

// Kinds are the kinds Compile takes, for stage.Env.OtherKinds.
var Kinds = []string{KindResourceUsage, KindClusterResourceUsage, KindMetric}

// The resources a usage gives.
const (
	ResourceCPU    = "cpu"
	ResourceMemory = "memory"
)

// document is one ResourceUsage or ClusterResourceUsage; decoding is
// strict, so a field not listed is an error.
type document struct {
	APIVersion string           `json:"apiVersion"`
	Kind       string           `json:"kind"`
	Metadata   stage.ObjectMeta `json:"metadata"`
	Spec       *spec            `json:"spec,omitempty"`
	Status     *struct {
		Conditions []any `json:"conditions,omitempty"`
	} `json:"status,omitempty"`
}

type spec struct {
	Selector *selector  `json:"selector,omitempty"`
	Usages   []groupDoc `json:"usages,omitempty"`
}

type selector struct {
	MatchNamespaces []string `json:"matchNamespaces,omitempty"`
	MatchNames      []string `json:"matchNames,omitempty"`
}

type groupDoc struct {
	Containers []string            `json:"containers,omitempty"`
	Usage      map[string]valueDoc `json:"usage,omitempty"`
}

type valueDoc struct {
	Value      *resource.Quantity `json:"value,omitempty"`
	Expression *string            `json:"expression,omitempty"`
}

// Set is the usage objects of a node's files.
type Set struct {
	// byPod are the ResourceUsages, by namespace/name; cluster the
	// ClusterResourceUsages in the files' order.
	byPod   map[string]*object
	cluster []*object
	// passed names the Metric objects passed over.
	passed []string
	eval   *evaluator
}

// object is one compiled ResourceUsage or ClusterResourceUsage.
type object struct {
	// name is "Kind name" or "Kind namespace/name", as Events name it.
	name              string
	namespaces, names []string
	groups            []group
}

type group struct {
	containers []string
	cpu, mem   *Value
}

// Compile decodes and compiles the usage objects the stage files held.
// Every error is one line naming the file, the object and the field.
func Compile(objs []stage.Foreign, opts Options) (*Set, error) {
	ev, err := newEvaluator(opts)
	if err != nil {
		return nil, err
	}
	set := &Set{byPod: map[string]*object{}, eval: ev}
	seen := map[string]string{}
	for _, f := range objs {
		o, where, err := set.compile(f)
		if err != nil {
			return nil, err
		}
		if o == nil {
			continue
		}
		if first, ok := seen[o.name]; ok {
			return nil, fmt.Errorf("%s: an object of that kind and name is in %s already", where, first)
		}
		seen[o.name] = f.Where
	}
	return set, nil
}

// compile adds one object and says where it is; nil for one passed over.
func (s *Set) compile(f stage.Foreign) (*object, string, error) {
	if f.Kind == KindMetric {
		var head struct {
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		_ = json.Unmarshal(f.JSON, &head)
		s.passed = append(s.passed, head.Metadata.Name)
		return nil, "", nil
	}
	var head struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(f.JSON, &head) // so that every later error names it
	where := f.Where
	if head.Metadata.Name != "" {
		where = fmt.Sprintf("%s (%s %q)", f.Where, f.Kind, head.Metadata.Name)
	}
	fail := func(format string, args ...any) (*object, string, error) {
		return nil, "", fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
	}
	var d document
	strict, err := sigsjson.UnmarshalStrict(f.JSON, &d, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fail("%s", oneLine(err.Error()))
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return fail("%s", oneLine(strings.Join(msgs, "; ")))
	}
	if d.APIVersion != stage.APIVersion {
		return fail("apiVersion %q: want %s", d.APIVersion, stage.APIVersion)
	}
	if d.Metadata.Name == "" {
		return fail("metadata.name: a %s has a name", d.Kind)
	}
	o := &object{name: d.Kind + " " + d.Metadata.Name}
	switch d.Kind {
	case KindResourceUsage:
		if d.Metadata.Namespace == "" {
			return fail("metadata.namespace: a ResourceUsage is named as its pod, namespace included")
		}
		o.name = d.Kind + " " + d.Metadata.Namespace + "/" + d.Metadata.Name
		if d.Spec != nil && d.Spec.Selector != nil {
			return fail("spec.selector: a ResourceUsage's pod is the one of its name; a selector is a ClusterResourceUsage's")
		}
	case KindClusterResourceUsage:
		if d.Metadata.Namespace != "" {
			return fail("metadata.namespace: a ClusterResourceUsage is not namespaced (spec.selector.matchNamespaces chooses namespaces)")
		}
		if d.Spec != nil && d.Spec.Selector != nil {
			o.namespaces, o.names = d.Spec.Selector.MatchNamespaces, d.Spec.Selector.MatchNames
		}
	}
	if d.Spec == nil {
		return fail("spec: a %s has a spec", d.Kind)
	}
	for i, g := range d.Spec.Usages {
		cg := group{containers: g.Containers}
		for res, v := range g.Usage {
			field := fmt.Sprintf("spec.usages[%d].usage.%s", i, res)
			var dst **Value
			switch res {
			case ResourceCPU:
				dst = &cg.cpu
			case ResourceMemory:
				dst = &cg.mem
			default:
				return fail("%s: the mock simulates cpu and memory usage only", field)
			}
			val, err := s.eval.value(res, v)
			if err != nil {
				return fail("%s%v", field, err)
			}
			val.object = o.name
			*dst = val
		}
		o.groups = append(o.groups, cg)
	}
	if d.Kind == KindResourceUsage {
		s.byPod[d.Metadata.Namespace+"/"+d.Metadata.Name] = o
	} else {
		s.cluster = append(s.cluster, o)
	}
	return o, where, nil
}

// PassedOver names the Metric objects the files held, which the mock does
// not read: its stats serve /metrics/resource.
func (s *Set) PassedOver() []string {
	if s == nil {
		return nil
	}
	return s.passed
}

// Empty tells whether no usage object was read; true for a nil Set.
func (s *Set) Empty() bool { return s == nil || (len(s.byPod) == 0 && len(s.cluster) == 0) }

// Container is what the usage objects give one container: CPU and memory,
// each nil when no object gives it.
type Container struct {
	CPU, Memory *Value
}

// For is what the usage objects give the container of the pod
// namespace/name: for each resource, the pod's ResourceUsage if it gives
// one, else the first ClusterResourceUsage whose selector takes the pod
// and that gives one. Within an object, a group naming the container wins
// over one naming none (which is every container's).
func (s *Set) For(namespace, name, container string) Container {
	var out Container
	if s == nil {
		return out
	}
	objs := make([]*object, 0, 1+len(s.cluster))
	if o, ok := s.byPod[namespace+"/"+name]; ok {
		objs = append(objs, o)
	}
	for _, o := range s.cluster {
		if o.selects(namespace, name) {
			objs = append(objs, o)
		}
	}
	for _, o := range objs {
		cpu, mem := o.lookup(container)
		if out.CPU == nil {
			out.CPU = cpu
		}
		if out.Memory == nil {
			out.Memory = mem
		}
	}
	return out
}

// selects follows kwok's ObjectSelector: an empty list matches all.
func (o *object) selects(namespace, name string) bool {
	return (len(o.namespaces) == 0 || contains(o.namespaces, namespace)) && (len(o.names) == 0 || contains(o.names, name))
}

func (o *object) lookup(container string) (cpu, mem *Value) {
	for _, named := range []bool{true, false} {
		for _, g := range o.groups {
			if (len(g.containers) > 0) != named || (named && !contains(g.containers, container)) {
				continue
			}
			if cpu == nil {
				cpu = g.cpu
			}
			if mem == nil {
				mem = g.mem
			}
		}
	}
	return cpu, mem
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// oneLine keeps an error on one line, as every error of a file is.
func oneLine(s string) string { return strings.Join(strings.Fields(s), " ") }

// Options tune the evaluation of expressions.
type Options struct {
	// CostLimit is cel-go's runtime cost limit of one evaluation;
	// DefaultCostLimit when zero.
	CostLimit uint64
	// Timeout bounds one evaluation's time; DefaultTimeout when zero.
	Timeout time.Duration
	// Now is the clock of Now() and SinceSecond(); time.Now when nil.
	Now func() time.Time
}
