package stage

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"

	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	sigsjson "sigs.k8s.io/json"
	"sigs.k8s.io/yaml"
)

// maxFileBytes bounds a stage file: kwok's published sets are a few KiB.
const maxFileBytes = 16 << 20

// Load reads and compiles the stage files at paths, for the node env
// describes. Each file is a multi-document YAML of Stages, a YAML list of
// them, or a List (kind StageList or List, with items); objects of
// env.OtherKinds may be among them, and are handed over (Set.Foreign).
// Every error is one line naming the file, the stage (its name, else its
// document's number) and the field.
func Load(paths []string, env Env) (*Set, error) {
	set := &Set{}
	names := map[string]string{}
	for _, path := range paths {
		data, err := readFile(path)
		if err != nil {
			return nil, fmt.Errorf("stage file %s: %w", path, err)
		}
		stages, foreign, err := parseFile(path, data, env)
		if err != nil {
			return nil, err
		}
		set.foreign = append(set.foreign, foreign...)
		for _, s := range stages {
			key := s.kind + "/" + s.name
			if first, ok := names[key]; ok {
				return nil, fmt.Errorf("stage file %s: stage %q: a %s stage of that name is in %s already", path, s.name, s.kind, first)
			}
			names[key] = path
			set.add(s)
		}
	}
	return set, nil
}

func readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, maxFileBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > maxFileBytes {
		return nil, fmt.Errorf("larger than %d MiB", maxFileBytes>>20)
	}
	return data, nil
}

// Parse compiles the stages in data, the contents of the file name (which
// errors name).
func Parse(name string, data []byte, env Env) ([]*Stage, error) {
	stages, _, err := parseFile(name, data, env)
	return stages, err
}

// ParseStage compiles one Stage object, JSON as the API server serves it;
// its errors start with where, which names the object for them.
func ParseStage(where string, js []byte, env Env) (*Stage, error) {
	s, err := parseStage(js, env)
	if err != nil {
		return nil, fmt.Errorf("%s%s", where, err)
	}
	return s, nil
}

// parseFile compiles the stages in data and hands over the objects of
// env.OtherKinds.
func parseFile(name string, data []byte, env Env) ([]*Stage, []Foreign, error) {
	var stages []*Stage
	var foreign []Foreign
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	for doc := 1; ; doc++ {
		chunk, err := r.Read()
		if errors.Is(err, io.EOF) {
			return stages, foreign, nil
		}
		if err != nil {
			return nil, nil, fmt.Errorf("stage file %s: document %d: %v", name, doc, oneLine(err))
		}
		where := fmt.Sprintf("stage file %s: document %d", name, doc)
		s, f, err := parseDocument(chunk, env, where)
		if err != nil {
			return nil, nil, fmt.Errorf("%s%s", where, err)
		}
		stages, foreign = append(stages, s...), append(foreign, f...)
	}
}

// listKinds are the kinds of a list of objects: kwok's lists of one kind
// or a List of any.
var listKinds = map[string]bool{"List": true, "StageList": true, "ResourceUsageList": true, "ClusterResourceUsageList": true}

// parseDocument compiles one YAML document: an object, a list of them or
// nothing. Errors start with ": " or " (stage ...)" or ", item N" to follow
// where, the document's name.
func parseDocument(chunk []byte, env Env, where string) ([]*Stage, []Foreign, error) {
	js, err := yaml.YAMLToJSON(chunk)
	if err != nil {
		return nil, nil, fmt.Errorf(": %v", oneLine(err))
	}
	js = bytes.TrimSpace(js)
	if len(js) == 0 || string(js) == "null" {
		return nil, nil, nil // an empty document, as after a leading ---
	}
	var items []byte
	switch js[0] {
	case '[':
		items = js
	case '{':
		var head struct {
			Kind  string          `json:"kind"`
			Items json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(js, &head); err != nil {
			return nil, nil, fmt.Errorf(": %v", oneLine(err))
		}
		if !listKinds[head.Kind] {
			return parseObject(js, env, where)
		}
		if head.Items == nil {
			return nil, nil, fmt.Errorf(": a %s has items", head.Kind)
		}
		items = head.Items
	default:
		return nil, nil, fmt.Errorf(": want a Stage (an object) or a list of them, got %.20s", js)
	}
	var list []json.RawMessage
	if err := json.Unmarshal(items, &list); err != nil {
		return nil, nil, fmt.Errorf(": items: %v", oneLine(err))
	}
	var stages []*Stage
	var foreign []Foreign
	for i, item := range list {
		s, f, err := parseObject(item, env, fmt.Sprintf("%s, item %d", where, i+1))
		if err != nil {
			return nil, nil, fmt.Errorf(", item %d%s", i+1, err)
		}
		stages, foreign = append(stages, s...), append(foreign, f...)
	}
	return stages, foreign, nil
}

// parseObject compiles a Stage, or hands over an object of env.OtherKinds.
func parseObject(js []byte, env Env, where string) ([]*Stage, []Foreign, error) {
	var head struct {
		Kind string `json:"kind"`
	}
	_ = json.Unmarshal(js, &head) // parseStage reports a malformed object
	for _, k := range env.OtherKinds {
		if head.Kind == k {
			return nil, []Foreign{{Kind: k, Where: where, JSON: js}}, nil
		}
	}
	s, err := parseStage(js, env)
	if err != nil {
		return nil, nil, err
	}
	return []*Stage{s}, nil, nil
}

// parseStage decodes one Stage strictly and compiles it.
func parseStage(js []byte, env Env) (*Stage, error) {
	// The name first, leniently, so that every later error names the stage.
	var head struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	}
	_ = json.Unmarshal(js, &head)
	where := ""
	if head.Metadata.Name != "" {
		where = fmt.Sprintf(" (stage %q)", head.Metadata.Name)
	}
	fail := func(format string, args ...any) (*Stage, error) {
		return nil, fmt.Errorf("%s: %s", where, fmt.Sprintf(format, args...))
	}
	var d document
	strict, err := sigsjson.UnmarshalStrict(js, &d, sigsjson.DisallowUnknownFields)
	if err != nil {
		return fail("%v", oneLine(err))
	}
	if len(strict) > 0 {
		msgs := make([]string, len(strict))
		for i, e := range strict {
			msgs[i] = e.Error()
		}
		return fail("%s", strings.Join(msgs, "; "))
	}
	if d.APIVersion != APIVersion || d.Kind != KindStage {
		return fail("apiVersion %q, kind %q: want apiVersion %s, kind %s", d.APIVersion, d.Kind, APIVersion, KindStage)
	}
	if d.Metadata.Name == "" {
		return fail("metadata.name: a stage has a name")
	}
	if d.Spec == nil {
		return fail("spec: a stage has a spec")
	}
	s, err := compile(d.Metadata.Name, d.Spec, env)
	if err != nil {
		return fail("%v", err)
	}
	return s, nil
}

// oneLine keeps an error on one line, as every error of a stage file is.
func oneLine(err error) string {
	return strings.Join(strings.Fields(err.Error()), " ")
}
