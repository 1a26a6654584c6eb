package mock

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
)

// DefaultCapacity is the node's capacity when no config file is given:
// generous, since a virtual node stands for a whole backend.
var DefaultCapacity = corev1.ResourceList{
	corev1.ResourceCPU:              resource.MustParse("20"),
	corev1.ResourceMemory:           resource.MustParse("100Gi"),
	corev1.ResourcePods:             resource.MustParse("10000"),
	corev1.ResourceEphemeralStorage: resource.MustParse("1Ti"),
}

// loadCapacity reads the config file: a JSON object keyed by node name, each
// an object of resource name to quantity:
//
//	{"vk0": {"cpu": "32", "memory": "256Gi", "pods": "5000", "nvidia.com/gpu": "8"}}
//
// Resources the node's entry leaves out keep their defaults. Errors name the
// file, the node and the field.
func loadCapacity(path, nodeName string) (corev1.ResourceList, error) {
	capacity := DefaultCapacity.DeepCopy()
	if path == "" {
		return capacity, nil
	}
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, fmt.Errorf("provider config: %w", err)
	}
	// Decoded in steps, so an error can name the node and the field.
	var nodes map[string]json.RawMessage
	dec := json.NewDecoder(bytes.NewReader(data))
	if err := dec.Decode(&nodes); err != nil {
		return nil, fmt.Errorf("provider config %s: %s", path, describeJSONError(data, err))
	}
	if dec.More() {
		return nil, fmt.Errorf("provider config %s: unexpected data after the JSON object", path)
	}
	raw, ok := nodes[nodeName]
	if !ok {
		known := make([]string, 0, len(nodes))
		for n := range nodes {
			known = append(known, n)
		}
		sort.Strings(known)
		return nil, fmt.Errorf("provider config %s: no entry for node %q (entries: %s)", path, nodeName, strings.Join(known, ", "))
	}
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(raw, &entry); err != nil {
		return nil, fmt.Errorf("provider config %s: node %q: must be an object of resource names to quantities, e.g. {\"cpu\": \"8\"}", path, nodeName)
	}
	for name, rawValue := range entry {
		var value string
		if err := json.Unmarshal(rawValue, &value); err != nil {
			return nil, fmt.Errorf("provider config %s: node %q: %s: quantity must be a string such as \"8\" or \"16Gi\", got %s", path, nodeName, name, rawValue)
		}
		q, err := resource.ParseQuantity(value)
		if err != nil {
			return nil, fmt.Errorf("provider config %s: node %q: %s: invalid quantity %q: %v", path, nodeName, name, value, err)
		}
		if q.Sign() < 0 {
			return nil, fmt.Errorf("provider config %s: node %q: %s: quantity %q must not be negative", path, nodeName, name, value)
		}
		capacity[corev1.ResourceName(name)] = q
	}
	return capacity, nil
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
