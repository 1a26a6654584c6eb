// Package commands is the virtual-kubelet command line: the root command
// that runs the daemon, and `version`, `providers`, `plugin` and `completion`.
package commands

import (
	"context"
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/vkubelet/virtual-kubelet/internal/version"
	"github.com/vkubelet/virtual-kubelet/provider"
)

// NewRootCommand returns the virtual-kubelet command.
func NewRootCommand() *cobra.Command {
	o := &Options{}
	groups := o.flagGroups()
	cmd := &cobra.Command{
		Use:   "virtual-kubelet --provider NAME [flags]",
		Short: "virtual-kubelet makes a provider look like a Kubernetes node",
		Long: `virtual-kubelet registers a Node in a Kubernetes cluster and runs the pods
scheduled to it on a provider (a cloud container service, a batch system,
another cluster, or the in-memory mock), serving the kubelet API so that
kubectl logs, exec, attach, port-forward and top work as on any node.

Pods reach the node only if they tolerate its taint, by default
virtual-kubelet.io/provider=<provider>:NoSchedule.`,
		Example:       "  virtual-kubelet --provider mock --nodename vk0 --kubeconfig ~/.kube/config",
		Args:          cobra.NoArgs,
		SilenceUsage:  true,
		SilenceErrors: true,
		PreRunE: func(cmd *cobra.Command, _ []string) error {
			if err := applyEnv(cmd.Flags()); err != nil {
				return err
			}
			o.scaleClientLimits(cmd.Flags())
			return o.Validate()
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return Run(cmd.Context(), o)
		},
	}
	for _, g := range groups {
		cmd.Flags().AddFlagSet(g.fs)
	}
	cmd.SetUsageFunc(func(c *cobra.Command) error { return usage(c, groups) })
	cmd.AddCommand(newVersionCommand(), newProvidersCommand(), newPluginCommand())
	return cmd
}

// usage prints the root command's flags in their groups.
func usage(c *cobra.Command, groups []flagGroup) error {
	w := c.OutOrStderr()
	if c.HasParent() {
		// A subcommand's flags are few: one list.
		fmt.Fprintf(w, "Usage:\n  %s\n", c.UseLine())
		if c.Example != "" {
			fmt.Fprintf(w, "\nExamples:\n%s\n", c.Example)
		}
		if c.HasAvailableLocalFlags() {
			fmt.Fprintf(w, "\nFlags:\n%s", c.LocalFlags().FlagUsages())
		}
		return nil
	}
	fmt.Fprintf(w, "Usage:\n  %s\n\nExamples:\n%s\n", c.UseLine(), c.Example)
	fmt.Fprintln(w, "\nCommands:")
	for _, sub := range c.Commands() {
		if sub.IsAvailableCommand() {
			fmt.Fprintf(w, "  %-12s %s\n", sub.Name(), sub.Short)
		}
	}
	for _, g := range groups {
		fmt.Fprintf(w, "\n%s flags:\n%s", g.title, g.fs.FlagUsages())
	}
	fmt.Fprintln(w, "\nGlobal flags:\n  -h, --help   help for virtual-kubelet")
	return nil
}

func newVersionCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintf(cmd.OutOrStdout(), "virtual-kubelet %s (commit %s, kubelet API %s)\n",
				version.Version, version.Commit(), version.KubeletVersion())
		},
	}
}

func newProvidersCommand() *cobra.Command {
	return &cobra.Command{
		Use:   "providers",
		Short: "List the providers built into this binary",
		Args:  cobra.NoArgs,
		Run: func(cmd *cobra.Command, _ []string) {
			fmt.Fprintln(cmd.OutOrStdout(), strings.Join(provider.Names(), "\n"))
		},
	}
}

// Execute runs the command line with args and returns the exit code. Errors
// are one line on stderr.
func Execute(ctx context.Context, args []string) int {
	return execute(ctx, args, os.Stdout, os.Stderr)
}

func execute(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	cmd := NewRootCommand()
	cmd.SetArgs(args)
	cmd.SetOut(stdout)
	cmd.SetErr(stderr)
	if err := cmd.ExecuteContext(ctx); err != nil {
		fmt.Fprintln(stderr, "virtual-kubelet: "+strings.ReplaceAll(err.Error(), "\n", "; "))
		return 1
	}
	return 0
}
