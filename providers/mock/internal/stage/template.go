package stage

import (
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"text/template"
	"time"

	"github.com/Masterminds/sprig/v3"
	"sigs.k8s.io/yaml"
)

// Env is what a node's templates know of it: the values of kwok's template
// functions.
type Env struct {
	// NodeName, NodeIP and NodePort are the node's name, InternalIP and
	// kubelet API port.
	NodeName string
	NodeIP   string
	NodePort int32
	// Version is what Version returns: kwok's templates print it as the
	// node's versions ("kwok-" + Version).
	Version string
	// StartTime is when the daemon started.
	StartTime time.Time
	// PodIPs returns the IPs of a pod of the node, primary first; nil when
	// it has none.
	PodIPs func(namespace, name string) []string
	// OtherKinds are the kinds another package reads from the same files
	// (kwok's --config mixes them): Load hands their documents over as
	// they are (Set.Foreign) rather than refusing them.
	OtherKinds []string
}

// nodeConditions are kwok's NodeConditions: a healthy node's, as JSON.
var nodeConditions = []any{
	condition("Ready", "True", "KubeletReady", "kubelet is posting ready status"),
	condition("MemoryPressure", "False", "KubeletHasSufficientMemory", "kubelet has sufficient memory available"),
	condition("DiskPressure", "False", "KubeletHasNoDiskPressure", "kubelet has no disk pressure"),
	condition("PIDPressure", "False", "KubeletHasSufficientPID", "kubelet has sufficient PID available"),
	condition("NetworkUnavailable", "False", "RouteCreated", "RouteController created a route"),
}

func condition(typ, status, reason, message string) map[string]any {
	return map[string]any{"type": typ, "status": status, "reason": reason, "message": message}
}

// funcs are the template functions: sprig's, then kwok's names over them.
// Pod templates and node templates get the same set; the pod ones ignore
// the node name they are given, as the mock's pods all run on env's node.
func (e Env) funcs() template.FuncMap {
	m := sprig.TxtFuncMap()
	start := e.StartTime.UTC().Format(time.RFC3339Nano)
	ips := func(namespace, name string) []string {
		if e.PodIPs == nil {
			return nil
		}
		return e.PodIPs(namespace, name)
	}
	nodeIPs := func() []string {
		if e.NodeIP == "" {
			return []string{}
		}
		return []string{e.NodeIP}
	}
	kwok := template.FuncMap{
		"Quote":          quote,
		"Now":            func() string { return time.Now().UTC().Format(time.RFC3339Nano) },
		"StartTime":      func() string { return start },
		"YAML":           toYAML,
		"Version":        func() string { return e.Version },
		"NodeConditions": func() []any { return nodeConditions },
		"NodeName":       func() string { return e.NodeName },
		"NodePort":       func() int32 { return e.NodePort },
		"NodeIP":         func() string { return e.NodeIP },
		// The node name, the pod's uid and hostNetwork are taken as any
		// value: a template passing a field the object lacks (nil) still
		// renders.
		"NodeIPWith":  func(any) string { return e.NodeIP },
		"NodeIPsWith": func(any) []string { return nodeIPs() },
		// PodIP, without a pod, is the node's: the mock hands out pod IPs
		// when it creates a pod, not from a template.
		"PodIP": func() string { return e.NodeIP },
		"PodIPWith": func(_, hostNetwork, _, name, namespace any) string {
			if got := ips(str(namespace), str(name)); hostNetwork != true && len(got) > 0 {
				return got[0]
			}
			return e.NodeIP
		},
		"PodIPsWith": func(_, hostNetwork, _, name, namespace any) []string {
			if got := ips(str(namespace), str(name)); hostNetwork != true && len(got) > 0 {
				return got
			}
			return nodeIPs()
		},
	}
	for k, v := range kwok {
		m[k] = v
	}
	// The daemon's environment is not the templates' to read: it may
	// hold credentials.
	delete(m, "env")
	delete(m, "expandenv")
	// A count from a typo must not make a template take the node's memory.
	// (The test checks both are wrapped.)
	if until, ok := m["until"].(func(int) []int); ok {
		m["until"] = func(n int) ([]int, error) {
			if n > maxCount {
				return nil, fmt.Errorf("until %d: at most %d", n, maxCount)
			}
			return until(n), nil
		}
	}
	if repeat, ok := m["repeat"].(func(int, string) string); ok {
		m["repeat"] = func(n int, s string) (string, error) {
			if n > maxCount || n*len(s) > maxCount*64 {
				return "", fmt.Errorf("repeat %d: at most %d", n, maxCount)
			}
			return repeat(n, s), nil
		}
	}
	return m
}

// str is a template's string argument; nil (a missing field) is empty.
func str(v any) string {
	if s, ok := v.(string); ok {
		return s
	}
	return ""
}

// quote writes v as a double-quoted YAML (and JSON) string: a string as
// JSON writes it, anything else as its JSON, quoted.
func quote(v any) string {
	data, err := json.Marshal(v)
	switch {
	case err != nil:
		return strconv.Quote(fmt.Sprint(v))
	case len(data) > 0 && data[0] == '"':
		return string(data)
	}
	return strconv.Quote(string(data))
}

// maxCount bounds sprig's until and repeat.
const maxCount = 10000

// maxIndent bounds YAML's indent: a template's typo must not make a
// gigabyte of spaces.
const maxIndent = 32

// toYAML writes v as YAML, each line after the first indented by indent
// levels of two spaces, to sit under a key of the template.
func toYAML(v any, indent ...int) (string, error) {
	data, err := yaml.Marshal(v)
	if err != nil {
		return "", err
	}
	out := string(data)
	if len(indent) == 1 && indent[0] > 0 {
		pad := strings.Repeat("  ", min(indent[0], maxIndent))
		out = strings.ReplaceAll("\n"+out, "\n", "\n"+pad)
	}
	return out, nil
}
