package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path"
	"path/filepath"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"

	"github.com/vkubelet/virtual-kubelet/node"
)

// DefaultCapacity is the node's capacity when no config file is given:
// generous, since a virtual node stands for a whole backend.
var DefaultCapacity = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("20"),
	corev1.ResourceMemory:           resource.MustParse("100Gi"),
	corev1.ResourcePods:             resource.MustParse("10000"),
	corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
}

// config is what the provider config file says about one node.
type config struct {
	capacity corev1.ResourceList
	// stateDir, if set, is where the mock keeps its pods across restarts
	// (see state.go).
	stateDir string
	// faults apply to every pod (see faults.go).
	faults faultSpec
	// copiedBytes is what the node's containers hold, together, of files
	// copied into them (see files.go).
	copiedBytes int64
	// devices are the node's devices (see devices.go); nil without any.
	devices *deviceSet
	// runtime is what the simulated runtime gives pods (see runtime.go).
	runtime node.RuntimeFeatures
}

// configFields are the keys of a node's entry in its structured form.
var configFields = []string{"capacity", "stateDir", "faults", "maxCopiedBytes", "devices", "runtimeFeatures"}

// matchPattern finds the entry whose key is a shell pattern (path.Match:
// "vk-*", "gpu-[0-3]") matching nodeName; of several, the longest pattern,
// the most specific, wins.
func matchPattern(nodes map[string]json.RawMessage, nodeName string) (string, json.RawMessage, bool) {
	best := ""
	for key := range nodes {
		if ok, _ := path.Match(key, nodeName); ok && (len(key) > len(best) || len(key) == len(best) && key < best) {
			best = key
		}
	}
	return best, nodes[best], best != ""
}

// loadConfig reads the config file: a JSON object keyed by node name. A
// node's entry is either an object of resource name to quantity, its
// capacity:
//
//	{"vk0": {"cpu": "32", "memory": "256Gi", "pods": "5000", "nvidia.com/gpu": "8"}}
//
// or an object with any of capacity (as above), devices (see
// parseDevices), runtimeFeatures (see parseRuntimeFeatures), stateDir, faults (the
// fault annotations' names after "mock.vkubelet.io/", for every pod; GetPods
// may be named too, and fail-for counts from the provider's start) and
// maxCopiedBytes (what the node's containers hold together of files copied
// into them, DefaultNodeCopiedBytes by default):
//
//	{"vk0": {"capacity": {"cpu": "32"}, "stateDir": "/var/lib/vk-mock/vk0",
//	         "faults": {"fail-calls": "*", "fail-for": "5m"}, "maxCopiedBytes": "1Gi"}}
//
// A key may also be a shell pattern ("vk-*") for the nodes of
// --node-count that have no entry of their own; the longest matching
// pattern applies, and a stateDir there gets a directory per node.
// Resources the node's entry leaves out keep their defaults. Errors name the
// file, the node and the field.
func loadConfig(path, nodeName string) (config, error) {
	// Without a file, every node shares the defaults: a provider never
	// changes its capacity, and a thousand nodes need not copy it.
	cfg := config{capacity: DefaultCapacity, copiedBytes: DefaultNodeCopiedBytes, runtime: defaultRuntimeFeatures}
	if path == "" {
		return cfg, nil
	}
	cfg.capacity = DefaultCapacity.DeepCopy()
	data, err := os.ReadFile(path)
	if err != nil {
		return cfg, fmt.Errorf("provider config: %w", err)
	}
	// Decoded in steps, so an error can name the node and the field.
	var nodes map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&nodes); err != nil {
		return cfg, fmt.Errorf("provider config %s: %s", path, describeJSONError(data, err))
	}
	if dec.More() {
		return cfg, fmt.Errorf("provider config %s: unexpected data after the JSON object", path)
	}
	raw, ok := nodes[nodeName]
	pattern := ""
	if !ok {
		pattern, raw, ok = matchPattern(nodes, nodeName)
	}
	if !ok {
		known := make([]string, 0, len(nodes))
		for n := range nodes {
			known = append(known, n)
		}
		sort.Strings(known)
		return cfg, fmt.Errorf("provider config %s: no entry for node %q (entries: %s)", path, nodeName, strings.Join(known, ", "))
	}
	fail := func(format string, args ...any) (config, error) {
		return cfg, fmt.Errorf("provider config %s: node %q: %s", path, nodeName, fmt.Sprintf(format, args...))
	}
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entry); err != nil {
		return fail("must be an object of resource names to quantities, e.g. {\"cpu\": \"8\"}, or of %s", strings.Join(configFields, ", "))
	}
	structured := false
	for _, f := range configFields {
		_, has := entry[f]
		structured = structured || has
	}
	if !structured {
		if err := parseCapacity(entry, cfg.capacity); err != nil {
			return fail("%v", err)
		}
		return cfg, nil
	}
	for key, value := range entry {
		switch key {
		case "capacity":
			var resources map[string]json.RawMessage
			if err := json.Unmarshal(value, &resources); err != nil {
				return fail("capacity: must be an object of resource names to quantities, e.g. {\"cpu\": \"8\"}")
			}
			if err := parseCapacity(resources, cfg.capacity); err != nil {
				return fail("capacity: %v", err)
			}
		case "stateDir":
			if err := json.Unmarshal(value, &cfg.stateDir); err != nil || cfg.stateDir == "" {
				return fail("stateDir: must be a directory path (a non-empty string), got %s", value)
			}
			if pattern != "" {
				// Nodes that share an entry keep their pods apart.
				cfg.stateDir = filepath.Join(cfg.stateDir, nodeName)
			}
		case "faults":
			var faults map[string]string
			if err := json.Unmarshal(value, &faults); err != nil {
				return fail(`faults: must be an object of strings, e.g. {"fail-calls": "*", "fail-for": "5m"}`)
			}
			for k := range faults {
				if k != "fail-calls" && k != "fail-for" && k != "hang-calls" && k != "hang-for" {
					return fail("faults: unknown setting %q (fail-calls, fail-for, hang-calls, hang-for)", k)
				}
			}
			if cfg.faults, err = parseFaults(faults, "", nodeCalls); err != nil {
				return fail("faults: %v", err)
			}
		case "maxCopiedBytes":
			if cfg.copiedBytes, err = parseBytes(value); err != nil {
				return fail("maxCopiedBytes: %v", err)
			}
		case "devices":
			if cfg.devices, err = parseDevices(value); err != nil {
				return fail("devices: %v", err)
			}
		case "runtimeFeatures":
			if cfg.runtime, err = parseRuntimeFeatures(value); err != nil {
				return fail("runtimeFeatures: %v", err)
			}
		default:
			return fail("unknown field %q: a structured entry has %s (resources go under capacity)", key, strings.Join(configFields, ", "))
		}
	}
	return cfg, nil
}

// parseCapacity sets into capacity the resources of an object of resource
// name to quantity.
func parseCapacity(resources map[string]json.RawMessage, capacity corev1.ResourceList) error {
	for name, rawValue := range resources {
		var value string
		if err := json.Unmarshal(rawValue, &value); err != nil {
			return fmt.Errorf("%s: quantity must be a string such as \"8\" or \"16Gi\", got %s", name, rawValue)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return fmt.Errorf("%s: invalid quantity %q: %v", name, value, err)
		}
		if q.Sign() < 0 {
			return fmt.Errorf("%s: quantity %q must not be negative", name, value)
		}
		capacity[corev1.ResourceName(name)] = q
	}
	return nil
}

// parseBytes reads a positive whole number of bytes written as a quantity
// string ("256Mi").
func parseBytes(value json.RawMessage) (int64, error) {
	var v string
	if err := json.Unmarshal(value, &v); err != nil {
		return 0, fmt.Errorf(`must be a quantity string such as "256Mi", got %s`, value)
	}
	q, err := resource.ParseQuantity(v)
	if err != nil {
		return 0, fmt.Errorf("invalid quantity %q: %v", v, err)
	}
	n, ok := q.AsInt64()
	if !ok || n <= 0 {
		return 0, fmt.Errorf("%q is not a positive whole number of bytes below 8Ei", v)
	}
	return n, nil
}

// describeJSONError turns a decoding error into one line with a position.
func describeJSONError(data []byte, err error) string {
	var syntax *json.SyntaxError
	var typ *json.UnmarshalTypeError
	switch {
	case errors.As(err, &syntax):
		line, col := position(data, syntax.Offset)
		return fmt.Sprintf("line %d, column %d: %v", line, col, err)
	case errors.As(err, &typ):
		return `must be an object keyed by node name, e.g. {"vk0": {"cpu": "8"}}`
	case errors.Is(err, io.EOF):
		return "empty file"
	}
	return err.Error()
}

func position(data []byte, offset int64) (line, col int) {
	line, col = 1, 1
	for i := 0; i < int(offset) && i < len(data); i++ {
		if data[i] == '\n' {
			line, col = line+1, 1
		} else {
			col++
		}
	}
	return line, col
}
