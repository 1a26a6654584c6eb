package intern

import corev1 "k8s.io/api/core/v1"

// Node replaces in place the values of node that nodes repeat with the
// shared instances: the Nodes of one template differ in little more than
// their names, labels, addresses, identifiers and times. node must not be
// shared yet: an informer's transform is the place. A nil Interner shares
// the node's strings only. Of labels and annotations only the keys are
// shared, not the maps: each Node has a label of its own (its name, in
// kubernetes.io/hostname) and often annotations of its own (a network
// plugin's addresses, a shared listener's paths), so a table of maps would
// keep a key for every Node and share none. Their values are left alone:
// many are the Node's own, and the runtime's table of canonical strings
// would hold an entry for each.
func (in *Interner) Node(node *corev1.Node) {
	if in == nil {
		in = &stringsOnly
	}
	m := &node.ObjectMeta
	m.Labels, m.Annotations = sharedKeys(m.Labels), sharedKeys(m.Annotations)
	each(m.Finalizers)
	for i := range node.Spec.Taints {
		t := &node.Spec.Taints[i]
		t.Key, t.Value, t.Effect = String(t.Key), String(t.Value), corev1.TaintEffect(String(string(t.Effect)))
	}
	s := &node.Status
	s.Capacity, s.Allocatable = in.ResourceList(s.Capacity), in.ResourceList(s.Allocatable)
	s.Conditions, s.Addresses = fit(s.Conditions), fit(s.Addresses)
	for i := range s.Conditions {
		c := &s.Conditions[i]
		c.Type, c.Status = corev1.NodeConditionType(String(string(c.Type))), corev1.ConditionStatus(String(string(c.Status)))
		c.Reason, c.Message = String(c.Reason), String(c.Message)
	}
	for i := range s.Addresses {
		s.Addresses[i].Type = corev1.NodeAddressType(String(string(s.Addresses[i].Type)))
	}
	// The machine's, system's and boot's IDs are the node's own.
	info := &s.NodeInfo
	info.KernelVersion, info.OSImage = String(info.KernelVersion), String(info.OSImage)
	info.ContainerRuntimeVersion, info.KubeletVersion = String(info.ContainerRuntimeVersion), String(info.KubeletVersion)
	info.KubeProxyVersion = String(info.KubeProxyVersion) //nolint:staticcheck // still set by some kubelets
	info.OperatingSystem, info.Architecture = String(info.OperatingSystem), String(info.Architecture)
	each(s.DeclaredFeatures)
	for i := range s.RuntimeHandlers {
		s.RuntimeHandlers[i].Name = String(s.RuntimeHandlers[i].Name)
	}
	for i := range s.Images {
		each(s.Images[i].Names)
	}
}

// fit is s in an array of its length. A decoder appends element by element,
// so five conditions (a Node's usual count) sit in an array of nine, 450
// bytes more for every Node a cache keeps.
func fit[S ~[]E, E any](s S) S {
	if cap(s) == len(s) {
		return s
	}
	return append(make(S, 0, len(s)), s...)
}

// sharedKeys is m with its keys the canonical strings (String): a map of
// the same size, the decoded one left to the collector.
func sharedKeys(m map[string]string) map[string]string {
	if len(m) == 0 {
		return m
	}
	out := make(map[string]string, len(m))
	for k, v := range m {
		out[String(k)] = v
	}
	return out
}
