//go:build e2e

// Package e2e_test runs virtual-kubelet --provider slurm against a real
// control plane and a real Slurm (package slurmtest): pods as Slurm jobs,
// their streams, devices, stop signals, user namespaces, the conformance
// suite and the bench. The tenant boundaries are tested in tenants, and
// Slurm's and the daemon's failures in faults: three packages that go
// test runs side by side.
package e2e_test

import (
	"testing"

	"github.com/vkubelet/virtual-kubelet/internal/testing/daemontest"
)

func TestMain(m *testing.M) { daemontest.Main(m) }
