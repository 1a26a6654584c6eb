package commands

import (
	"errors"
	"fmt"
	"strings"

	"github.com/spf13/pflag"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/util/validation"
)

// ManagedNodeOptions choose the Nodes, created by others, that the daemon
// manages (kwok's flags, with kwok's names): it serves each matching Node
// from when it appears until it is deleted, and registers none itself.
type ManagedNodeOptions struct {
	All                bool
	Single             string
	LabelSelector      string
	AnnotationSelector string
}

func (m *ManagedNodeOptions) addFlags(fs *pflag.FlagSet) {
	fs.BoolVar(&m.All, "manage-all-nodes", false, "manage every Node of the cluster, created by others, instead of registering one (kwok's flag); exclusive with the other --manage-* flags")
	fs.StringVar(&m.Single, "manage-single-node", "", "manage the Node of this name, created by others, instead of registering one (kwok's flag)")
	fs.StringVar(&m.LabelSelector, "manage-nodes-with-label-selector", "", "manage the Nodes, created by others, whose labels match this selector (kubectl's syntax: type=kwok, 'tier in (a,b)', !key), instead of registering one (kwok's flag); with --manage-nodes-with-annotation-selector, both must match")
	fs.StringVar(&m.AnnotationSelector, "manage-nodes-with-annotation-selector", "", "manage the Nodes, created by others, whose annotations match this selector (a label selector's syntax, over annotations: kwok.x-k8s.io/node=fake), instead of registering one (kwok's flag)")
}

// Enabled reports whether a --manage-* flag is set: the daemon then
// manages Nodes and registers none.
func (m *ManagedNodeOptions) Enabled() bool {
	return m.All || m.Single != "" || m.LabelSelector != "" || m.AnnotationSelector != ""
}

// validate checks the --manage-* flags and how they go with the node
// flags: --manage-all-nodes and --manage-single-node stand alone, the two
// selectors combine; --node-count is for registered nodes and cannot be
// given with them.
func (m *ManagedNodeOptions) validate(n *NodeOptions) error {
	if !m.Enabled() {
		return nil
	}
	if _, err := m.selector(); err != nil {
		return err
	}
	if n.NodeCount != 1 {
		return fmt.Errorf("--node-count %d registers nodes, which the --manage-* flags do not: the daemon manages the Nodes others created instead", n.NodeCount)
	}
	return nil
}

// nodeSelector picks the Nodes a daemon manages: by name, by labels (the
// API server filters on these), by annotations (filtered here), or all.
type nodeSelector struct {
	name        string
	labels      labels.Selector
	annotations labels.Selector
}

// selector parses the --manage-* flags into a nodeSelector; a conflict or
// a selector that does not parse is an error naming the flag.
func (m *ManagedNodeOptions) selector() (*nodeSelector, error) {
	var set []string
	for _, f := range []struct {
		name string
		on   bool
	}{
		{"--manage-all-nodes", m.All},
		{"--manage-single-node", m.Single != ""},
		{"--manage-nodes-with-label-selector", m.LabelSelector != ""},
		{"--manage-nodes-with-annotation-selector", m.AnnotationSelector != ""},
	} {
		if f.on {
			set = append(set, f.name)
		}
	}
	if (m.All || m.Single != "") && len(set) > 1 {
		return nil, fmt.Errorf("%s are exclusive: %s stands alone (the two selectors may go together)", strings.Join(set, " and "), set[0])
	}
	s := &nodeSelector{name: m.Single, labels: labels.Everything(), annotations: labels.Everything()}
	if m.Single != "" {
		if errs := validation.IsDNS1123Subdomain(m.Single); len(errs) > 0 {
			return nil, fmt.Errorf("--manage-single-node %q is not a valid node name: %s", m.Single, strings.Join(errs, "; "))
		}
	}
	var err error
	if m.LabelSelector != "" {
		if s.labels, err = labels.Parse(m.LabelSelector); err != nil {
			return nil, fmt.Errorf("--manage-nodes-with-label-selector %q: %w", m.LabelSelector, err)
		}
	}
	if m.AnnotationSelector != "" {
		if s.annotations, err = labels.Parse(m.AnnotationSelector); err != nil {
			return nil, fmt.Errorf("--manage-nodes-with-annotation-selector %q: %w", m.AnnotationSelector, err)
		}
	}
	if !m.All && s.name == "" && s.labels.Empty() && s.annotations.Empty() {
		return nil, errors.New("--manage-nodes-with-label-selector and --manage-nodes-with-annotation-selector select every Node when empty: say --manage-all-nodes for that")
	}
	return s, nil
}

// listOptions narrow the watch of Nodes to those the API server can
// filter: by name and by labels.
func (s *nodeSelector) listOptions(lo *metav1.ListOptions) {
	if s.name != "" {
		lo.FieldSelector = fields.OneTermEqualSelector("metadata.name", s.name).String()
	}
	if !s.labels.Empty() {
		lo.LabelSelector = s.labels.String()
	}
}

// matches reports whether the daemon manages node.
func (s *nodeSelector) matches(node *corev1.Node) bool {
	return (s.name == "" || node.Name == s.name) &&
		s.labels.Matches(labels.Set(node.Labels)) &&
		s.annotations.Matches(labels.Set(node.Annotations))
}
