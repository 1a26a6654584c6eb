//go:build e2e

// Package tenants_test attacks virtual-kubelet --provider slurm as a
// tenant would, from inside a pod and as another tenant's Unix user on
// the node, and tests how namespaces map to tenants; each attack is
// asserted to fail. Each test's Slurm is its own (package slurmtest).
package tenants_test

import (
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }
