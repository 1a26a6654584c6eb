// Command virtual-kubelet registers a Node backed by a provider and serves it
// like a kubelet would. See internal/commands for the command line.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vkubelet/virtual-kubelet/internal/commands"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(commands.Execute(ctx, os.Args[1:]))
}
