package node

import (
	"context"
	"slices"
	"strings"
	"sync"

	corev1 "k8s.io/api/core/v1"
	kubeletapis "k8s.io/kubelet/pkg/apis"

	"github.com/vkubelet/virtual-kubelet/node/log"
)

// RestrictNodeLabels applies to the labels a provider or plugin wants on
// node nodeName the rules the NodeRestriction admission plugin applies to
// a kubelet writing its own Node, so that a provider cannot steer
// workloads to itself (node-role.kubernetes.io/control-plane) or pose as
// another node. A change from current to proposed (a label added, changed
// or removed) is refused when the label is
//
//   - under node-restriction.kubernetes.io/ (or a subdomain of it), or
//   - under kubernetes.io/ or k8s.io/ (or their subdomains) and not one a
//     kubelet may set (k8s.io/kubelet/pkg/apis.IsKubeletLabel: hostname,
//     topology, instance type, OS and architecture, and the
//     kubelet.kubernetes.io/ and node.kubernetes.io/ namespaces), or
//   - kubernetes.io/hostname with another value than nodeName.
//
// The result is proposed with each refused change undone (the label as
// current has it, or absent), and refused names those labels, sorted.
// current is what the Node already has from a trusted writer (nil at
// registration); neither map is modified.
func RestrictNodeLabels(nodeName string, current, proposed map[string]string) (result map[string]string, refused []string) {
	result = make(map[string]string, len(proposed))
	for k, v := range proposed {
		if was, ok := current[k]; ok && was == v || labelAllowed(nodeName, k, v) {
			result[k] = v
			continue
		}
		refused = append(refused, k)
		if was, ok := current[k]; ok {
			result[k] = was
		}
	}
	for k, v := range current {
		if _, ok := proposed[k]; !ok && !labelAllowed(nodeName, k, "") {
			refused = append(refused, k)
			result[k] = v
		}
	}
	slices.Sort(refused)
	return result, refused
}

// labelAllowed says whether a kubelet may set label key to value on node
// nodeName (value "" for a removal, which the hostname rule allows).
func labelAllowed(nodeName, key, value string) bool {
	if key == corev1.LabelHostname {
		return value == "" || value == nodeName
	}
	namespace, _, ok := strings.Cut(key, "/")
	if !ok {
		return true
	}
	if inNamespace(namespace, corev1.LabelNamespaceNodeRestriction) {
		return false
	}
	if inNamespace(namespace, "kubernetes.io") || inNamespace(namespace, "k8s.io") {
		return kubeletapis.IsKubeletLabel(key)
	}
	return true
}

// inNamespace says whether a label's namespace is ns or a subdomain of it.
func inNamespace(namespace, ns string) bool {
	return namespace == ns || strings.HasSuffix(namespace, "."+ns)
}

// maxNamedRefusals bounds the labels a NodeLabelGuard remembers having
// named: a provider inventing new label keys cannot grow it without end.
const maxNamedRefusals = 1024

// NodeLabelGuard applies RestrictNodeLabels to what the providers of one
// node propose, and names each refused label in the log once, however
// often a provider proposes it again. It is safe for concurrent use.
type NodeLabelGuard struct {
	nodeName string
	mu       sync.Mutex
	named    map[string]struct{}
	full     bool // maxNamedRefusals reached, and said so
}

// NewNodeLabelGuard is the guard of node nodeName's labels.
func NewNodeLabelGuard(nodeName string) *NodeLabelGuard {
	return &NodeLabelGuard{nodeName: nodeName, named: map[string]struct{}{}}
}

// Restrict is RestrictNodeLabels for the guard's node; each refused label
// not named before is logged as a warning on ctx's logger.
func (g *NodeLabelGuard) Restrict(ctx context.Context, current, proposed map[string]string) map[string]string {
	result, refused := RestrictNodeLabels(g.nodeName, current, proposed)
	if len(refused) == 0 {
		return result
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	for _, label := range refused {
		if _, ok := g.named[label]; ok {
			continue
		}
		if len(g.named) >= maxNamedRefusals {
			if !g.full {
				g.full = true
				log.G(ctx).Warnf("node %s: %d node labels refused already; further refused labels are not named", g.nodeName, len(g.named))
			}
			break
		}
		g.named[label] = struct{}{}
		log.G(ctx).WithField("label", label).Warnf("node %s: the provider may not set node label %s (the kubelet's NodeRestriction rules); it is not applied", g.nodeName, label)
	}
	return result
}
