package main

import (
	"context"
	"fmt"

	"k8s.io/client-go/kubernetes"
)

// managedDaemon turns spec, the daemon of the daemon pass, into one that
// manages Nodes the bench creates (-managed-nodes): it creates names as
// Karpenter's kwok provider would (kwok's annotation, as kwok's own pass
// has them), and the daemon takes over those of its pass, one listener
// for all (--kubelet-listener shared), registering none.
func managedDaemon(ctx context.Context, client kubernetes.Interface, spec daemonSpec, names []string) (daemonSpec, error) {
	logf("daemon: creating %d Nodes for it to manage", len(names))
	if err := registerKwokNodes(ctx, client, spec.name, names); err != nil {
		return spec, err
	}
	spec.extra = append(spec.extra,
		"--manage-nodes-with-annotation-selector", kwokAnnotation+"=fake",
		"--manage-nodes-with-label-selector", fmt.Sprintf("%s=%s", passLabel, spec.name),
		"--kubelet-listener", "shared")
	// The daemon's --nodename names no Node of its own; one kubelet API
	// port for every node.
	spec.name += "-daemon"
	spec.nodes = 1
	return spec, nil
}
