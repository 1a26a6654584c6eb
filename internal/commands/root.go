// Package commands is the virtual-kubelet command line.
package commands

import (
	"context"
	"fmt"
	"os"

	"github.com/spf13/cobra"
)

// NewRootCommand returns the virtual-kubelet root command.
func NewRootCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "virtual-kubelet",
		Short: "virtual-kubelet makes a provider look like a Kubernetes node",
		Long: `virtual-kubelet registers a Node in a Kubernetes cluster and runs the pods
scheduled to it on a provider (a cloud container service, a batch system,
another cluster, or the in-memory mock), serving the kubelet API so that
kubectl logs, exec, attach, port-forward and top work as on any node.`,
		SilenceUsage: true,
	}
}

// Execute runs the command line and returns the process exit code.
func Execute(ctx context.Context, args []string) int {
	cmd := NewRootCommand()
	cmd.SetArgs(args)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(os.Stderr, "Error:", err)
		return 1
	}
	return 0
}
