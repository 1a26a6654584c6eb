package main

// The grpc provider runs pods in a provider plugin, another process (see
// `virtual-kubelet plugin`).

import (
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/grpcplugin"
)

func init() { provider.Register("grpc", grpcplugin.New) }
