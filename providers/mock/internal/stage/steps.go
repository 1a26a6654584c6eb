package stage

import (
	"bytes"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"text/template"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"sigs.k8s.io/yaml"
)

// Step is one thing a stage does; exactly one field is set.
type Step struct {
	// Event is recorded on the object.
	Event *Event
	// Finalizers change the object's metadata.finalizers.
	Finalizers *FinalizerChange
	// Delete deletes the object.
	Delete bool
	// Patch changes the object's status.
	Patch *StatusPatch
}

// compileSteps turns next (in kwok's order: event, finalizers, status,
// delete) or steps into Steps.
func compileSteps(spec *stageSpec, env Env) ([]Step, error) {
	if spec.Next != nil && len(spec.Steps) > 0 {
		return nil, fmt.Errorf("spec: give next or steps, not both")
	}
	var out []Step
	if n := spec.Next; n != nil {
		if n.Event != nil {
			out = append(out, Step{Event: n.Event})
		}
		if n.Finalizers != nil {
			out = append(out, Step{Finalizers: newFinalizerChange(n.Finalizers)})
		}
		switch {
		case n.StatusPatchAs != nil:
			return nil, fmt.Errorf("spec.next.statusPatchAs: not available for Pods and Nodes")
		case n.StatusSubresource != nil && *n.StatusSubresource != "status":
			return nil, fmt.Errorf("spec.next.statusSubresource %q: Pods and Nodes have status only", *n.StatusSubresource)
		case len(n.Patches) > 0 && n.StatusTemplate != "":
			return nil, fmt.Errorf("spec.next: give patches or statusTemplate, not both")
		}
		for i := range n.Patches {
			p, err := compilePatch(&n.Patches[i], env)
			if err != nil {
				return nil, fmt.Errorf("spec.next.patches[%d].%v", i, err)
			}
			out = append(out, Step{Patch: p})
		}
		if n.StatusTemplate != "" {
			p, err := compilePatch(&patch{Subresource: "status", Root: "status", Template: n.StatusTemplate}, env)
			if err != nil {
				return nil, fmt.Errorf("spec.next.statusTemplate: %v", err)
			}
			out = append(out, Step{Patch: p})
		}
		if n.Delete {
			out = append(out, Step{Delete: true})
		}
	}
	for i, st := range spec.Steps {
		set := 0
		for _, has := range []bool{st.Patch != nil, st.Event != nil, st.Finalizers != nil, st.Delete, st.Apply != nil} {
			if has {
				set++
			}
		}
		// kwok takes a step's parts in this order.
		if st.Apply != nil {
			return nil, fmt.Errorf("spec.steps[%d].apply: not supported by the mock", i)
		}
		if st.Event != nil {
			out = append(out, Step{Event: st.Event})
		}
		if st.Finalizers != nil {
			out = append(out, Step{Finalizers: newFinalizerChange(st.Finalizers)})
		}
		if st.Delete {
			out = append(out, Step{Delete: true})
		}
		if st.Patch != nil {
			p, err := compilePatch(st.Patch, env)
			if err != nil {
				return nil, fmt.Errorf("spec.steps[%d].patch.%v", i, err)
			}
			out = append(out, Step{Patch: p})
		}
		if set == 0 {
			return nil, fmt.Errorf("spec.steps[%d]: an empty step", i)
		}
	}
	for _, st := range out {
		if e := st.Event; e != nil && e.Type != "Normal" && e.Type != "Warning" {
			return nil, fmt.Errorf("event.type %q: Normal or Warning", e.Type)
		}
		if e := st.Event; e != nil && e.Reason == "" {
			return nil, fmt.Errorf("event.reason: an Event has a reason")
		}
	}
	return out, nil
}

// FinalizerChange adds, removes or empties finalizers.
type FinalizerChange struct {
	add, remove []string
	empty       bool
}

func newFinalizerChange(f *finalizers) *FinalizerChange {
	c := &FinalizerChange{empty: f.Empty}
	for _, v := range f.Add {
		c.add = append(c.add, v.Value)
	}
	for _, v := range f.Remove {
		c.remove = append(c.remove, v.Value)
	}
	return c
}

// JSONPatch is the JSON patch (RFC 6902) that makes the change to an object
// with the finalizers current; nil when it changes nothing.
func (c *FinalizerChange) JSONPatch(current []string) ([]byte, error) {
	type op struct {
		Op    string `json:"op"`
		Path  string `json:"path"`
		Value any    `json:"value,omitempty"`
	}
	var ops []op
	keep := slices.DeleteFunc(slices.Clone(current), func(f string) bool { return c.empty || slices.Contains(c.remove, f) })
	switch {
	case len(keep) == 0 && len(current) > 0:
		ops = append(ops, op{Op: "remove", Path: "/metadata/finalizers"})
	default:
		for i := len(current) - 1; i >= 0; i-- {
			if !slices.Contains(keep, current[i]) {
				ops = append(ops, op{Op: "remove", Path: "/metadata/finalizers/" + strconv.Itoa(i)})
			}
		}
	}
	var add []string
	for _, f := range c.add {
		if !slices.Contains(keep, f) && !slices.Contains(add, f) {
			add = append(add, f)
		}
	}
	switch {
	case len(add) == 0:
	case len(keep) == 0:
		ops = append(ops, op{Op: "add", Path: "/metadata/finalizers", Value: add})
	default:
		for _, f := range add {
			ops = append(ops, op{Op: "add", Path: "/metadata/finalizers/-", Value: f})
		}
	}
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

// StatusPatch changes an object's status with a rendered template.
type StatusPatch struct {
	root      string
	tmpl      *template.Template
	strategic bool
}

func compilePatch(p *patch, env Env) (*StatusPatch, error) {
	if p.Subresource != "status" {
		return nil, fmt.Errorf("subresource %q: the mock patches the status only", p.Subresource)
	}
	if p.Impersonation != nil {
		return nil, fmt.Errorf("impersonation: not available for Pods and Nodes")
	}
	if p.Root != "" && p.Root != "status" {
		return nil, fmt.Errorf("root %q: the status patch's root is status or empty", p.Root)
	}
	sp := &StatusPatch{root: p.Root, strategic: true}
	if p.Type != nil {
		switch *p.Type {
		case "strategic":
		case "merge":
			sp.strategic = false
		default:
			return nil, fmt.Errorf("type %q: the mock takes strategic and merge patches", *p.Type)
		}
	}
	t, err := template.New("status").Funcs(env.funcs()).Parse(strings.TrimSpace(p.Template))
	if err != nil {
		return nil, fmt.Errorf("%v", oneLine(err)) // "template: status:3: ..."
	}
	sp.tmpl = t
	return sp, nil
}

// Apply renders the template for obj and patches obj's JSON with it; it
// returns the object's new status (what a status subresource takes of a
// patch). kind (KindPod or KindNode) gives the strategic merge's keys.
func (p *StatusPatch) Apply(obj *Object, kind string) (map[string]any, error) {
	raw, err := json.Marshal(obj.JSON)
	if err != nil {
		return nil, err
	}
	var data any
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber() // numbers print as written, not as floats
	if err := dec.Decode(&data); err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	if err := p.tmpl.Execute(&buf, data); err != nil {
		return nil, fmt.Errorf("%v", oneLine(err))
	}
	rendered, err := yaml.YAMLToJSON(buf.Bytes())
	if err != nil {
		return nil, fmt.Errorf("template's YAML: %v", oneLine(err))
	}
	var body any
	if err := json.Unmarshal(rendered, &body); err != nil {
		return nil, fmt.Errorf("template's YAML: %v", oneLine(err))
	}
	if body == nil {
		body = map[string]any{}
	}
	if p.root != "" {
		body = map[string]any{p.root: body}
	}
	if _, ok := body.(map[string]any); !ok {
		return nil, fmt.Errorf("template: renders %T, not an object", body)
	}
	patchJSON, err := json.Marshal(body)
	if err != nil {
		return nil, err
	}
	var merged []byte
	if p.strategic {
		var schema any = &corev1.Pod{}
		if kind == KindNode {
			schema = &corev1.Node{}
		}
		merged, err = strategicpatch.StrategicMergePatch(raw, patchJSON, schema)
	} else {
		merged, err = jsonpatch.MergePatch(raw, patchJSON)
	}
	if err != nil {
		return nil, fmt.Errorf("patching the status: %v", oneLine(err))
	}
	var out map[string]any
	if err := json.Unmarshal(merged, &out); err != nil {
		return nil, err
	}
	status, _ := out["status"].(map[string]any)
	if status == nil {
		status = map[string]any{}
	}
	return status, nil
}
