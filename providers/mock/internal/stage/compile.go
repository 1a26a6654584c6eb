package stage

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

	"k8s.io/apimachinery/pkg/labels"
)

// The kinds of object stages apply to.
const (
	KindPod  = "Pod"
	KindNode = "Node"
)

// Set is the compiled stages of some files, by the kind they apply to.
type Set struct {
	pods, nodes Lifecycle
	foreign     []Foreign
}

// Foreign is an object of one of Env.OtherKinds, as a file held it.
type Foreign struct {
	// Kind is its kind.
	Kind string
	// Where names it for errors: the file and the document's number (and
	// the item's, in a list), as "stage file F: document N, item M".
	Where string
	// JSON is the object.
	JSON []byte
}

// Foreign are the objects of Env.OtherKinds the files held, in order; nil
// for a nil Set.
func (s *Set) Foreign() []Foreign {
	if s == nil {
		return nil
	}
	return s.foreign
}

func (s *Set) add(st *Stage) {
	if st.sel == nil {
		return // kwok drops a stage without a selector: it matches nothing
	}
	if st.kind == KindPod {
		s.pods = append(s.pods, st)
	} else {
		s.nodes = append(s.nodes, st)
	}
}

// With is a Set of s's stages and objects with more stages added, s left
// as it is. A stage of more whose kind and name one of s's has is not
// added but returned: s, the files, wins.
func (s *Set) With(more []*Stage) (*Set, []*Stage) {
	out := &Set{}
	have := map[string]bool{}
	if s != nil {
		out.pods = slices.Clone(s.pods)
		out.nodes = slices.Clone(s.nodes)
		out.foreign = s.foreign
		for _, l := range []Lifecycle{s.pods, s.nodes} {
			for _, st := range l {
				have[st.kind+"/"+st.name] = true
			}
		}
	}
	var clashes []*Stage
	for _, st := range more {
		if have[st.kind+"/"+st.name] {
			clashes = append(clashes, st)
			continue
		}
		out.add(st)
	}
	return out, clashes
}

// Pods are the stages that apply to pods; nil for a nil Set.
func (s *Set) Pods() Lifecycle {
	if s == nil {
		return nil
	}
	return s.pods
}

// Nodes are the stages that apply to nodes; nil for a nil Set.
func (s *Set) Nodes() Lifecycle {
	if s == nil {
		return nil
	}
	return s.nodes
}

// Stage is one compiled Stage.
type Stage struct {
	name, kind string
	sel        *compiledSelector
	weight     int64
	weightFrom *valueFrom
	// duration and jitter are the delay's; hasDelay and hasJitter say
	// whether the stage gives them at all.
	hasDelay, hasJitter bool
	duration, jitter    *time.Duration
	durationFrom        *valueFrom
	jitterFrom          *valueFrom
	immediateNext       bool
	steps               []Step
}

// Name is the stage's metadata.name.
func (s *Stage) Name() string { return s.name }

// Kind is the kind of object the stage applies to, KindPod or KindNode.
func (s *Stage) Kind() string { return s.kind }

// ImmediateNextStage says the stage after it is matched at once, not on
// the next change of the object.
func (s *Stage) ImmediateNextStage() bool { return s.immediateNext }

// Steps are what the stage does, in order.
func (s *Stage) Steps() []Step { return s.steps }

type compiledSelector struct {
	labels, annotations labels.Selector
	exprs               []*requirement
}

func compile(name string, spec *stageSpec, env Env) (*Stage, error) {
	s := &Stage{name: name, weight: spec.Weight, immediateNext: spec.ImmediateNextStage != nil && *spec.ImmediateNextStage}
	switch ref := spec.ResourceRef; {
	case ref.APIGroup != "" && ref.APIGroup != "v1":
		return nil, fmt.Errorf("spec.resourceRef.apiGroup %q: the mock runs stages of Pods and Nodes (apiGroup v1) only", ref.APIGroup)
	case ref.Kind == KindPod || ref.Kind == KindNode:
		s.kind = ref.Kind
	default:
		return nil, fmt.Errorf("spec.resourceRef.kind %q: the mock runs stages of Pods and Nodes only", ref.Kind)
	}
	if spec.Weight < 0 {
		return nil, fmt.Errorf("spec.weight %d: must not be negative", spec.Weight)
	}
	var err error
	if spec.Selector != nil {
		if s.sel, err = compileSelector(spec.Selector); err != nil {
			return nil, fmt.Errorf("spec.selector.%v", err)
		}
	}
	if s.weightFrom, err = newValueFrom(spec.WeightFrom); err != nil {
		return nil, fmt.Errorf("spec.weightFrom: %v", err)
	}
	if d := spec.Delay; d != nil {
		if err := s.compileDelay(d); err != nil {
			return nil, fmt.Errorf("spec.delay.%v", err)
		}
	}
	if s.steps, err = compileSteps(spec, env); err != nil {
		return nil, err
	}
	return s, nil
}

func compileSelector(sel *selector) (*compiledSelector, error) {
	c := &compiledSelector{}
	if sel.MatchLabels != nil {
		set := labels.Set(sel.MatchLabels)
		if _, err := labels.ValidatedSelectorFromSet(set); err != nil {
			return nil, fmt.Errorf("matchLabels: %v", err)
		}
		c.labels = labels.SelectorFromSet(set)
	}
	if sel.MatchAnnotations != nil {
		// Annotation values are free text: matched as they are, not as
		// label values.
		c.annotations = labels.SelectorFromValidatedSet(labels.Set(sel.MatchAnnotations))
	}
	for i, e := range sel.MatchExpressions {
		key, op, values := e.Key, e.Operator, e.Values
		switch {
		case e.CEL != nil:
			return nil, fmt.Errorf("matchExpressions[%d].cel: CEL selectors are not supported by the mock; use key/operator/values or jq", i)
		case e.JQ != nil && (key != "" || op != "" || values != nil):
			return nil, fmt.Errorf("matchExpressions[%d]: give key/operator/values or jq, not both", i)
		case e.JQ != nil:
			key, op, values = e.JQ.Key, e.JQ.Operator, e.JQ.Values
		}
		r, err := newRequirement(key, op, values)
		if err != nil {
			return nil, fmt.Errorf("matchExpressions[%d]: %v", i, err)
		}
		c.exprs = append(c.exprs, r)
	}
	return c, nil
}

func (s *Stage) compileDelay(d *delay) error {
	ms := func(field string, v *int64) (*time.Duration, error) {
		if v == nil {
			return nil, nil
		}
		if *v < 0 || *v > int64(time.Duration(1<<62)/time.Millisecond) {
			return nil, fmt.Errorf("%s %d: must be between 0 and about 146 years", field, *v)
		}
		dur := time.Duration(*v) * time.Millisecond
		return &dur, nil
	}
	var err error
	if s.duration, err = ms("durationMilliseconds", d.DurationMilliseconds); err != nil {
		return err
	}
	if s.jitter, err = ms("jitterDurationMilliseconds", d.JitterDurationMilliseconds); err != nil {
		return err
	}
	if s.durationFrom, err = newValueFrom(d.DurationFrom); err != nil {
		return fmt.Errorf("durationFrom: %v", err)
	}
	if s.jitterFrom, err = newValueFrom(d.JitterDurationFrom); err != nil {
		return fmt.Errorf("jitterDurationFrom: %v", err)
	}
	s.hasDelay = s.duration != nil || s.durationFrom != nil
	s.hasJitter = s.jitter != nil || s.jitterFrom != nil
	return nil
}

// Object is a Pod or Node as stages see it: its JSON, decoded by
// encoding/json into an any, with labels and annotations apart for the
// label selectors.
type Object struct {
	JSON                map[string]any
	Labels, Annotations map[string]string
}

// matches tells whether obj meets every part of the selector.
func (s *Stage) matches(obj *Object) (bool, error) {
	if s.sel.labels != nil && !s.sel.labels.Matches(labels.Set(obj.Labels)) {
		return false, nil
	}
	if s.sel.annotations != nil && !s.sel.annotations.Matches(labels.Set(obj.Annotations)) {
		return false, nil
	}
	for _, r := range s.sel.exprs {
		if ok, err := r.matches(obj.JSON); err != nil || !ok {
			return false, err
		}
	}
	return true, nil
}

// Lifecycle is the stages of one kind, in the order of their files.
type Lifecycle []*Stage

// Match chooses the stage obj goes through next: of those whose selectors
// match, one at random by weight, as kwok does (a stage whose weightFrom
// yields no number is chosen only when no other has a weight). Nil when
// none matches. An error names the stage whose expression failed.
func (l Lifecycle) Match(obj *Object, rnd *rand.Rand) (*Stage, error) {
	var matched []*Stage
	for _, s := range l {
		ok, err := s.matches(obj)
		if err != nil {
			return nil, fmt.Errorf("stage %q: selector: %w", s.name, err)
		}
		if ok {
			matched = append(matched, s)
		}
	}
	switch len(matched) {
	case 0:
		return nil, nil
	case 1:
		return matched[0], nil
	}
	weights := make([]int64, len(matched))
	var total int64
	var known []*Stage
	for i, s := range matched {
		w, ok, err := s.Weight(obj)
		if err != nil {
			return nil, err
		}
		if !ok {
			weights[i] = -1
			continue
		}
		weights[i] = w
		total += w
		known = append(known, s)
	}
	switch {
	case len(known) == 0:
		return matched[rnd.IntN(len(matched))], nil
	case total <= 0:
		return known[rnd.IntN(len(known))], nil
	}
	off := rnd.Int64N(total)
	for i, s := range matched {
		if weights[i] <= 0 {
			continue
		}
		if off -= weights[i]; off < 0 {
			return s, nil
		}
	}
	return matched[len(matched)-1], nil
}

// Weight is the stage's weight for obj: weightFrom's number (a number, or
// a string strconv.ParseInt reads), else weight. ok is false when
// weightFrom yields something that is not a number.
func (s *Stage) Weight(obj *Object) (w int64, ok bool, err error) {
	if s.weightFrom == nil {
		return s.weight, true, nil
	}
	v, found, err := s.weightFrom.first(obj.JSON)
	if err != nil {
		return 0, false, fmt.Errorf("stage %q: weightFrom: %w", s.name, err)
	}
	if !found {
		return s.weight, true, nil
	}
	switch t := v.(type) {
	case string:
		n, err := strconv.ParseInt(t, 0, 64)
		return max(n, 0), err == nil, nil
	case int:
		return max(int64(t), 0), true, nil
	case float64:
		return max(int64(t), 0), true, nil
	}
	return s.weight, true, nil
}

// Delay is how long obj waits before the stage's steps, at now: the
// duration (durationFrom's, else durationMilliseconds), and with a jitter,
// a time chosen at random between the duration and the jitter (the jitter
// itself when it is the shorter). durationFrom and jitterDurationFrom read
// a Go duration ("5s") or a time (RFC 3339), which is waited for.
func (s *Stage) Delay(obj *Object, now time.Time, rnd *rand.Rand) (time.Duration, error) {
	if !s.hasDelay {
		return 0, nil
	}
	d, ok, err := durationOf(s.duration, s.durationFrom, obj, now)
	if err != nil || !ok {
		return 0, s.wrap("delay.durationFrom", err)
	}
	if !s.hasJitter {
		return max(d, 0), nil
	}
	j, ok, err := durationOf(s.jitter, s.jitterFrom, obj, now)
	switch {
	case err != nil:
		return 0, s.wrap("delay.jitterDurationFrom", err)
	case !ok:
		return max(d, 0), nil
	case j <= d:
		return max(j, 0), nil
	}
	return max(d, 0) + time.Duration(rnd.Int64N(int64(j-max(d, 0)))), nil
}

func (s *Stage) wrap(field string, err error) error {
	if err == nil {
		return nil
	}
	return fmt.Errorf("stage %q: %s: %w", s.name, field, err)
}

// durationOf is from's duration on obj, else def; ok is false when there
// is neither (or from yields an empty string).
func durationOf(def *time.Duration, from *valueFrom, obj *Object, now time.Time) (time.Duration, bool, error) {
	if from != nil {
		v, found, err := from.first(obj.JSON)
		if err != nil {
			return 0, false, err
		}
		if str, isStr := v.(string); found && isStr {
			if str == "" {
				return 0, false, nil
			}
			if t, err := time.Parse(time.RFC3339Nano, str); err == nil {
				return t.Sub(now), true, nil
			}
			if d, err := time.ParseDuration(str); err == nil {
				return d, true, nil
			}
		}
	}
	if def == nil {
		return 0, false, nil
	}
	return *def, true, nil
}
