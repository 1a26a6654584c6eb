//go:build !no_slurm_provider

package main

// The slurm provider (pods run as Slurm batch jobs) is compiled in unless
// the no_slurm_provider tag is given.

import (
	"github.com/vkubelet/virtual-kubelet/provider"
	"github.com/vkubelet/virtual-kubelet/providers/slurm"
)

func init() {
	provider.Register("slurm", slurm.New)
}
