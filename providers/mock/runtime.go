package mock

import (
	"encoding/json"
	"fmt"

	"github.com/vkubelet/virtual-kubelet/node"
)

// RuntimeFeatures says what the mock's simulated runtime gives pods: user
// namespaces (hostUsers: false) and recursive read-only mounts, both unless
// the node's config turns them off (see parseRuntimeFeatures).
func (p *Provider) RuntimeFeatures() node.RuntimeFeatures { return p.runtime }

// defaultRuntimeFeatures are the mock's: it simulates every container, so
// it can claim what a modern runtime (containerd 2 on Linux 6.3) has.
var defaultRuntimeFeatures = node.RuntimeFeatures{UserNamespaces: true, RecursiveReadOnlyMounts: true}

// parseRuntimeFeatures reads a node's runtimeFeatures entry, e.g.
// {"userNamespaces": false} to simulate a runtime without user namespaces;
// a feature it leaves out keeps its default.
func parseRuntimeFeatures(value json.RawMessage) (node.RuntimeFeatures, error) {
	f := defaultRuntimeFeatures
	var entry map[string]json.RawMessage
	if err := json.Unmarshal(value, &entry); err != nil {
		return f, fmt.Errorf(`must be an object of booleans, e.g. {"userNamespaces": false}`)
	}
	for key, v := range entry {
		var target *bool
		switch key {
		case "userNamespaces":
			target = &f.UserNamespaces
		case "recursiveReadOnlyMounts":
			target = &f.RecursiveReadOnlyMounts
		default:
			return f, fmt.Errorf("unknown feature %q (userNamespaces, recursiveReadOnlyMounts)", key)
		}
		if err := json.Unmarshal(v, target); err != nil {
			return f, fmt.Errorf("%s: must be true or false, got %s", key, v)
		}
	}
	return f, nil
}
