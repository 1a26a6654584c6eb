// Command virtual-kubelet registers a Node backed by a provider and serves it
// like a kubelet would. The providers it is built with register in this
// package's provider_*.go files; package daemon is the command line.
package main

import (
	"context"
	"os"
	"os/signal"
	"syscall"

	"github.com/vkubelet/virtual-kubelet/daemon"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	os.Exit(daemon.Execute(ctx, os.Args[1:]))
}
