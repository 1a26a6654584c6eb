package kubernetes

import (
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/vkubelet/virtual-kubelet/node/errdefs"
)

// namer maps A's namespace/name to B's. Every name it gives in B is
// <cluster>.<node>.<A namespace>.<A name>: the first three parts are DNS
// labels, which hold no dot, so the name determines all four parts and two
// sources never share a name in B, whichever clusters and nodes write into
// one namespace there.
type namer struct {
	namespace string // one namespace in B, or
	prefix    string // B namespace = prefix + A namespace
	cluster   string // sourceCluster
	node      string // the virtual node
}

// remoteNamespace is the namespace in B of A's namespace. A prefix and a
// long namespace of A may not fit a namespace name: that is refused.
func (n namer) remoteNamespace(namespace string) (string, error) {
	if n.namespace != "" {
		return n.namespace, nil
	}
	ns := n.prefix + namespace
	if errs := validation.IsDNS1123Label(ns); len(errs) > 0 {
		return "", errdefs.InvalidInputf("namespace %q: the remote cluster's namespace %q is not a valid name: %s", namespace, ns, strings.Join(errs, "; "))
	}
	return ns, nil
}

// nodePrefix is what every name this node gives in B begins with.
func (n namer) nodePrefix() string {
	return n.cluster + "." + n.node + "."
}

// namePrefix is what every name in B of an object of A's namespace begins
// with.
func (n namer) namePrefix(namespace string) string {
	return n.nodePrefix() + namespace + "."
}

// remoteName is the name in B of the object namespace/name of A; a name
// past B's limit of 253 characters is refused.
func (n namer) remoteName(namespace, name string) (string, error) {
	remote := n.namePrefix(namespace) + name
	if errs := validation.IsDNS1123Subdomain(remote); len(errs) > 0 {
		return "", errdefs.InvalidInputf("%s/%s: the name in the remote cluster, %q, is not a valid name: %s", namespace, name, remote, strings.Join(errs, "; "))
	}
	return remote, nil
}
