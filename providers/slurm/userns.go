package slurm

import "github.com/vkubelet/virtual-kubelet/node"

// RuntimeFeatures says what the job's sandbox gives pods: bubblewrap runs
// every container in a user namespace of its own (--unshare-user, see
// sandbox.Args), so a pod asking hostUsers: false gets one. Recursive
// read-only mounts are not claimed.
func (p *Provider) RuntimeFeatures() node.RuntimeFeatures {
	return node.RuntimeFeatures{UserNamespaces: true}
}

var _ node.RuntimeFeaturesDeclarer = (*Provider)(nil)
