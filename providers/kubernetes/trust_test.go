package kubernetes

import (
	"testing"
)

// TestSignatures: a pod of B is this node's only as signed, unchanged, by
// this node of this cluster with this key.
func TestSignatures(t *testing.T) {
	p := testProvider(t, Config{})
	remote, err := p.remotePod(restrictedPod())
	if err != nil {
		t.Fatal(err)
	}
	if _, _, _, ok := p.trust.sourceOf(remote); !ok {
		t.Fatal("this node's own pod is not taken for its")
	}
	for _, tt := range []struct {
		what   string
		change func(s *signer)
	}{
		{"another node", func(s *signer) { s.node = "vk-c" }},
		{"another cluster", func(s *signer) { s.cluster = "z" }},
		{"another key", func(s *signer) { s.key = []byte("fedcba9876543210fedcba9876543210") }},
	} {
		s := p.trust
		tt.change(&s)
		if _, _, _, ok := s.sourceOf(remote); ok {
			t.Errorf("a pod signed by vk-b of a is taken for %s's", tt.what)
		}
	}
	for _, tt := range []struct {
		what   string
		change func()
	}{
		{"source namespace relabelled", func() { remote.Labels[LabelSourceNamespace] = "kube-system" }},
		{"source name changed", func() { remote.Annotations[AnnotationSourceName] = "kube-apiserver" }},
		{"source UID relabelled", func() { remote.Labels[LabelSourceUID] = "other" }},
		{"renamed", func() { remote.Name = "other" }},
	} {
		saved := remote.DeepCopy()
		tt.change()
		if _, _, _, ok := p.trust.sourceOf(remote); ok {
			t.Errorf("%s: still taken for this node's", tt.what)
		}
		remote = saved
	}
	cm := copyOf(t, p, "settings", "")
	if !p.trust.ownsCopy(kindConfigMap, cm) || p.trust.ownsCopy(kindSecret, cm) {
		t.Error("a copy's signature does not hold its kind")
	}
}
