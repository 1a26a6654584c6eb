//go:build !no_mock_provider

package main

// The mock provider is compiled in unless the no_mock_provider tag is given.

import (
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/mock"
)

func init() { provider.Register("mock", mock.New) }
