//go:build !no_kubernetes_provider

package main

// The kubernetes provider (pods run in another cluster) is compiled in
// unless the no_kubernetes_provider tag is given.

import (
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/kubernetes"
)

func init() { provider.Register("kubernetes", kubernetes.New) }
