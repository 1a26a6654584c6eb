// Package daemon runs the virtual-kubelet command line (flags, servers,
// kubelet API, leader election, many nodes) from a binary of your own: its
// main imports the providers it is built with, each registering itself
// with package provider, and hands its arguments to Execute. A provider in
// another module gets the daemon this way, without a fork.
//
//	import (
//		"github.com/vkubelet/virtual-kubelet/daemon"
//		_ "example.com/acme" // its init calls provider.Register("acme", New)
//	)
//
//	func main() {
//		ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
//		defer stop()
//		os.Exit(daemon.Execute(ctx, os.Args[1:]))
//	}
package daemon

import (
	"context"

	"github.com/vkubelet/virtual-kubelet/internal/commands"
)

// Execute runs the virtual-kubelet command line with args (os.Args[1:])
// and returns the process's exit code: 0, or 1 after one line on stderr
// saying what failed. The daemon stops when ctx ends. --provider picks
// from the providers registered before it is called.
func Execute(ctx context.Context, args []string) int {
	return commands.Execute(ctx, args)
}
